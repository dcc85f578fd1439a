// Logits of the FP32 CPU reference (llmc/gpt2_cpu.h, llmc/llama_cpu.h) for a model file of either family: the
// oracle that dev/test/test_export_hf.py compares the exported Hugging Face model with.
//
// usage: ./build/model_logits MODEL.bin TOKENS.bin LOGITS.bin
//   (file formats: dev/test/logits_file.h)
#include "llmc/utils.h"
#include "llmc/checkpoint.h"
#include "llmc/gpt2_cpu.h"
#include "llmc/llama_cpu.h"
#include "dev/test/logits_file.h"

int main(int argc, char** argv) {
    if (argc != 4) { die("usage: %s MODEL.bin TOKENS.bin LOGITS.bin", argv[0]); }
    CheckpointHeader ck;
    float* params = checkpoint_load_params(argv[1], -1, &ck);
    ModelConfig c = checkpoint_model(&ck);
    int B, T;
    int* tokens = logits_file_read_tokens(argv[2], &B, &T);
    if (c.family == FAMILY_LLAMA) {
        LlamaCPU m;
        llamacpu_build(&m, &ck.llama, params);
        llamacpu_forward(&m, tokens, NULL, B, T);
        logits_file_write(argv[3], m.acts.logits, (size_t)B * T, c.vocab_size, c.padded_vocab_size);
        llamacpu_free(&m);
    } else {
        GPT2CPU m;
        gpt2cpu_build(&m, &ck.config, params);
        gpt2cpu_forward(&m, tokens, NULL, B, T);
        logits_file_write(argv[3], m.acts.logits, (size_t)B * T, c.vocab_size, c.padded_vocab_size);
        gpt2cpu_free(&m);
    }
    printf("%s logits of %s for B=%d T=%d written to %s\n", family_names[c.family], argv[1], B, T, argv[3]);
    free(tokens);
    free(params);
    return 0;
}
