"""The input and output files of the Python tools (dev/export_hf.py, dev/eval_hf.py, dev/data/prepare_evals.py,
dev/data/tokenize_text.py, scripts/plot_losses.py) and their one-line usage errors.

An input must be a regular file, checked before it is opened: opening a FIFO blocks until a writer comes, and a
device file such as /dev/zero never ends. An output is written under a temporary name beside it and renamed into
place only when every output of the run is complete, so a failed run leaves neither a partial file nor a missing
previous one. An output path that exists as something else than a regular file (a folder, a FIFO, a device such as
/dev/null) is refused: the rename would replace it. Needs only the standard library.
"""
import argparse
import os
import stat


class FileProblem(Exception):
    """an input or output file that cannot be used; the message names the file and the problem"""


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, its usage errors one line "<tool>: error: ..." and exit status 2 (-h shows the usage)"""

    def __init__(self, tool, **kwargs):
        super().__init__(**kwargs)
        self.tool = tool

    def error(self, message):
        self.exit(2, f"{self.tool}: error: {message}\n")


def input_size(path, what="file"):
    """the size in bytes of the regular file at path; FileProblem when it is missing or not a regular file"""
    try:
        st = os.stat(path)
    except OSError as e:
        raise FileProblem(f"cannot read {what} '{path}': {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise FileProblem(f"{what} '{path}' is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise FileProblem(f"{what} '{path}' is not a regular file (a FIFO, device or socket)")
    return st.st_size


def check_output(path):
    """FileProblem when path exists and is not a regular file"""
    if os.path.lexists(path) and not os.path.isfile(path):
        kind = "a directory" if os.path.isdir(path) else "not a regular file"
        raise FileProblem(f"output '{path}' exists and is {kind}")


def temporary_name(path):
    """the name beside path that its new contents have until they are complete: hidden and unique to the process"""
    folder, base = os.path.split(path)
    return os.path.join(folder, f".{base}.{os.getpid()}.tmp")


def remove_quietly(paths):
    """removes the files that exist of paths (the temporaries of a failed run)"""
    for p in paths:
        try:
            os.remove(p)
        except OSError:
            pass


def put_in_place(pairs):
    """renames each (temporary, final) path pair; FileProblem when a rename fails"""
    for tmp, final in pairs:
        try:
            os.replace(tmp, final)
        except OSError as e:
            raise FileProblem(f"cannot write '{final}': {e.strerror}") from None


def make_folder(folder):
    """creates folder (and its parents) unless it is one; FileProblem when it cannot be"""
    if os.path.isdir(folder):
        return
    if os.path.lexists(folder):
        raise FileProblem(f"output folder '{folder}' exists and is not a directory")
    try:
        os.makedirs(folder)
    except OSError as e:
        raise FileProblem(f"cannot create the output folder '{folder}': {e.strerror}") from None


def write_files(folder, files):
    """writes files {name: list of bytes chunks} into folder (created if missing): each under its temporary name,
    then, once all are complete, renamed into place; FileProblem when one cannot be written (the temporaries are
    removed and the files already there are left as they were)"""
    make_folder(folder)
    finals = [os.path.join(folder, name) for name in files]
    for path in finals:
        check_output(path)
    temps = [temporary_name(p) for p in finals]
    try:
        for tmp, final, chunks in zip(temps, finals, files.values()):
            try:
                with open(tmp, "wb") as f:
                    for chunk in chunks:
                        f.write(chunk)
            except OSError as e:
                raise FileProblem(f"cannot write '{final}': {e.strerror}") from None
        put_in_place(zip(temps, finals))
    finally:
        remove_quietly(temps)   # after the renames none is left; after a failure the partial ones
