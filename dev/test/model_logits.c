// Logits of the FP32 CPU reference (llmc/gpt2_cpu.h, llmc/llama_cpu.h) for a model file of either family: the
// oracle that dev/test/test_export_hf.py compares the exported Hugging Face model with.
//
// usage: ./build/model_logits MODEL.bin TOKENS.bin LOGITS.bin
//   TOKENS.bin: int32 B, int32 T, then int32 tokens[B*T]
//   LOGITS.bin: float32 logits[B*T*V] (the real vocab columns only)
#include "llmc/utils.h"
#include "llmc/checkpoint.h"
#include "llmc/gpt2_cpu.h"
#include "llmc/llama_cpu.h"

// reads the token file: *B, *T and B*T tokens (fresh memory); dies on a bad shape or size
static int* read_tokens(const char* path, int* B, int* T) {
    FILE* fp = fopen_check(path, "rb");
    long size = file_size(fp);
    int32_t bt[2];
    if (size < (long)sizeof(bt)) { die("token file '%s' is %ld bytes, shorter than its B, T header", path, size); }
    fread_check(bt, sizeof(int32_t), 2, fp, "token file header");
    if (bt[0] <= 0 || bt[1] <= 0 || size != (long)sizeof(bt) + (long)bt[0] * bt[1] * (long)sizeof(int32_t)) {
        die("token file '%s': B=%d T=%d does not match its %ld bytes", path, bt[0], bt[1], size);
    }
    *B = bt[0]; *T = bt[1];
    int* tokens = (int*)malloc_check((size_t)bt[0] * bt[1] * sizeof(int));
    fread_check(tokens, sizeof(int), (size_t)bt[0] * bt[1], fp, "tokens");
    fclose_check(fp);
    return tokens;
}

// writes rows of Vp logits as rows of the first V columns
static void write_logits(const char* path, const float* logits, size_t rows, int V, int Vp) {
    FILE* fp = fopen_check(path, "wb");
    for (size_t r = 0; r < rows; r++) { fwrite_check(logits + r * Vp, sizeof(float), (size_t)V, fp); }
    fclose_check(fp);
}

int main(int argc, char** argv) {
    if (argc != 4) { die("usage: %s MODEL.bin TOKENS.bin LOGITS.bin", argv[0]); }
    CheckpointHeader ck;
    FILE* fp = checkpoint_open_model(argv[1], &ck);
    ModelConfig c = checkpoint_model(&ck);
    float* params = (float*)malloc_check(model_num_params(&c) * sizeof(float));
    checkpoint_read_payload(fp, &ck, params, NULL, NULL);
    fclose_check(fp);
    int B, T;
    int* tokens = read_tokens(argv[2], &B, &T);
    if (c.family == FAMILY_LLAMA) {
        LlamaCPU m;
        llamacpu_build(&m, &ck.llama, params);
        llamacpu_forward(&m, tokens, NULL, B, T);
        write_logits(argv[3], m.acts.logits, (size_t)B * T, c.vocab_size, c.padded_vocab_size);
        llamacpu_free(&m);
    } else {
        GPT2CPU m;
        gpt2cpu_build(&m, &ck.config, params);
        gpt2cpu_forward(&m, tokens, NULL, B, T);
        write_logits(argv[3], m.acts.logits, (size_t)B * T, c.vocab_size, c.padded_vocab_size);
        gpt2cpu_free(&m);
    }
    printf("%s logits of %s for B=%d T=%d written to %s\n", family_names[c.family], argv[1], B, T, argv[3]);
    free(tokens);
    free(params);
    return 0;
}
