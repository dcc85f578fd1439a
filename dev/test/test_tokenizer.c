// Tests of llmc/tokenizer.h: known ids of the committed data/gpt2_tokenizer.bin (run from the repo root),
// a missing file (a warning, init_ok = 0), every kind of bad file, an out-of-range id, and safe_print_token.
#include <sys/wait.h>
#include <unistd.h>
#include "llmc/tokenizer.h"
#include "dev/test/test_common.h"

#define REAL_TOKENIZER "data/gpt2_tokenizer.bin"

static char tmpdir[] = "/tmp/test_tokenizer_XXXXXX";
static char bad_path[4096];

typedef void (*child_fn)(const char* arg);

// runs fn(arg) in a child with stdout and stderr into out; returns the exit code, or -1 if it did not exit
static int run_child(child_fn fn, const char* arg, char* out, size_t out_len) {
    int pipefd[2];
    if (pipe(pipefd) != 0) { return -1; }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 1);
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        fn(arg);
        fflush(stdout);
        _exit(0);
    }
    close(pipefd[1]);
    memset(out, 0, out_len);
    size_t got = 0;
    ssize_t r;
    while (got < out_len - 1 && (r = read(pipefd[0], out + got, out_len - 1 - got)) > 0) { got += (size_t)r; }
    close(pipefd[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// 1 if fn(arg) exits non-zero with `expect` in its output
static int fails_with(child_fn fn, const char* arg, const char* expect) {
    char out[4096];
    int code = run_child(fn, arg, out, sizeof(out));
    int ok = code > 0 && strstr(out, expect) != NULL;
    if (!ok) { printf("  child exit %d, expected '%s' in: %s\n", code, expect, out); }
    return ok;
}

static void child_load(const char* path) {
    Tokenizer t;
    tokenizer_init(&t, path);
    tokenizer_free(&t);
}

static void child_decode(const char* id) {
    Tokenizer t;
    tokenizer_init(&t, REAL_TOKENIZER);
    tokenizer_decode(&t, (uint32_t)strtoul(id, NULL, 10));
    tokenizer_free(&t);
}

static void child_missing(const char* path) {
    Tokenizer t;
    tokenizer_init(&t, path);
    printf("init_ok=%d\n", t.init_ok);
    tokenizer_free(&t);
}

static void child_print(const char* piece) { safe_print_token(piece); }

// a small tokenizer file: header {magic, version, vocab, eot}, the pieces "a", "bc", "<|eot|>", then extra bytes
static void write_tokenizer(int magic, int version, int vocab, int eot, long cut, const char* extra) {
    const char* pieces[3] = {"a", "bc", "<|eot|>"};
    int32_t h[TOKENIZER_HEADER_INTS] = {0};
    h[0] = magic; h[1] = version; h[2] = vocab; h[3] = eot;
    FILE* fp = fopen_check(bad_path, "wb");
    fwrite_check(h, sizeof(int32_t), TOKENIZER_HEADER_INTS, fp);
    for (int i = 0; i < 3; i++) {
        unsigned char len = (unsigned char)strlen(pieces[i]);
        fwrite_check(&len, 1, 1, fp);
        fwrite_check(pieces[i], 1, len, fp);
    }
    fwrite_check(extra, 1, strlen(extra), fp);
    fclose_check(fp);
    if (cut > 0 && truncate(bad_path, cut) != 0) { die("truncate failed: %s", strerror(errno)); }
}

static void test_real_tokenizer(void) {
    Tokenizer t;
    tokenizer_init(&t, REAL_TOKENIZER);
    CHECK(t.init_ok, "loads %s (run from the repo root; regenerate with dev/data/make_tokenizer_bin.py)", REAL_TOKENIZER);
    if (!t.init_ok) { return; }
    CHECK(t.vocab_size == 50257 && t.eot_token == 50256, "vocab %u, eot %d", t.vocab_size, t.eot_token);
    CHECK(strcmp(tokenizer_decode(&t, 15496), "Hello") == 0, "15496 -> '%s'", tokenizer_decode(&t, 15496));
    CHECK(strcmp(tokenizer_decode(&t, 995), " world") == 0, "995 -> '%s'", tokenizer_decode(&t, 995));
    CHECK(strcmp(tokenizer_decode(&t, 198), "\n") == 0, "198 -> newline");
    CHECK(strcmp(tokenizer_decode(&t, 0), "!") == 0, "0 -> '%s'", tokenizer_decode(&t, 0));
    CHECK(strcmp(tokenizer_decode(&t, 50256), "<|endoftext|>") == 0, "50256 -> '%s'", tokenizer_decode(&t, 50256));
    tokenizer_free(&t);
    CHECK(fails_with(child_decode, "50257", "token 50257 is out of range (vocab size 50257)"), "decode past the vocab");
}

static void test_small_and_bad_files(void) {
    write_tokenizer(TOKENIZER_MAGIC, TOKENIZER_VERSION, 3, 2, 0, "");
    Tokenizer t;
    tokenizer_init(&t, bad_path);
    CHECK(t.init_ok && t.vocab_size == 3 && t.eot_token == 2, "small file loads");
    CHECK(strcmp(tokenizer_decode(&t, 1), "bc") == 0 && strcmp(tokenizer_decode(&t, 2), "<|eot|>") == 0, "small file decodes");
    tokenizer_free(&t);

    write_tokenizer(20240520, TOKENIZER_VERSION, 3, 2, 0, "");
    CHECK(fails_with(child_load, bad_path, "bad magic 20240520, expected 20240328 (is this a tokenizer file?)"), "bad magic");
    write_tokenizer(TOKENIZER_MAGIC, 1, 3, 2, 0, "");
    CHECK(fails_with(child_load, bad_path, "unsupported version 1"), "bad version");
    write_tokenizer(TOKENIZER_MAGIC, TOKENIZER_VERSION, 3, 3, 0, "");
    CHECK(fails_with(child_load, bad_path, "bad vocab size 3 / eot token 3"), "eot outside the vocab");
    write_tokenizer(TOKENIZER_MAGIC, TOKENIZER_VERSION, 4, 2, 0, "");
    CHECK(fails_with(child_load, bad_path, "truncated: token 3 of 4"), "fewer tokens than the header says");
    write_tokenizer(TOKENIZER_MAGIC, TOKENIZER_VERSION, 3, 2, 1024 + 4, "");
    CHECK(fails_with(child_load, bad_path, "truncated: token 1 of 3"), "cut inside a token");
    write_tokenizer(TOKENIZER_MAGIC, TOKENIZER_VERSION, 3, 2, 0, "xyz");
    CHECK(fails_with(child_load, bad_path, "has 3 bytes after its 3 tokens"), "trailing bytes");
    write_tokenizer(TOKENIZER_MAGIC, TOKENIZER_VERSION, 3, 2, 100, "");
    CHECK(fails_with(child_load, bad_path, "shorter than its 1024-byte header"), "cut inside the header");
    unlink(bad_path);

    char out[4096], missing[4096];
    snprintf(missing, sizeof(missing), "%s/no_such_tokenizer.bin", tmpdir);
    int code = run_child(child_missing, missing, out, sizeof(out));
    CHECK(code == 0 && strstr(out, "warning: cannot open tokenizer") && strstr(out, "init_ok=0"),
          "missing file: warning and init_ok = 0 (exit %d): %s", code, out);
}

static void test_safe_print(void) {
    char out[256];
    run_child(child_print, "Hi\tthere\n", out, sizeof(out));
    CHECK(strcmp(out, "Hi\tthere\n") == 0, "printable text and whitespace pass: '%s'", out);
    run_child(child_print, "\x01", out, sizeof(out));
    CHECK(out[0] == 0, "a raw control byte is skipped");
    run_child(child_print, "a\x1b[2Jb\x7f", out, sizeof(out));
    CHECK(strcmp(out, "a[2Jb") == 0, "control bytes inside a piece are skipped: '%s'", out);
    run_child(child_print, "\xc3\xa9t\xc3", out, sizeof(out));
    CHECK(strcmp(out, "\xc3\xa9t\xc3") == 0, "UTF-8 bytes, whole or partial, pass");
}

int main(void) {
    if (mkdtemp(tmpdir) == NULL) { die("mkdtemp failed: %s", strerror(errno)); }
    snprintf(bad_path, sizeof(bad_path), "%s/tokenizer.bin", tmpdir);
    test_real_tokenizer();
    test_small_and_bad_files();
    test_safe_print();
    rmdir(tmpdir);
    return test_summary("test_tokenizer");
}
