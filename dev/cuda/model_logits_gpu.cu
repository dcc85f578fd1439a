// Logits of the GPU trainer's forward pass (train_gpt2_adahop.cu, BF16) for a model or checkpoint file of either
// family: the trainer side of dev/test/export_gpu_test.py, which compares them with the exported Hugging Face model.
//
// usage: ./build/model_logits_gpu MODEL.bin TOKENS.bin LOGITS.bin   (file formats: dev/test/logits_file.h)
#define TESTING
#include "train_gpt2_adahop.cu"
#include "dev/test/logits_file.h"

int main(int argc, char** argv) {
    if (argc != 4) { die("usage: %s MODEL.bin TOKENS.bin LOGITS.bin", argv[0]); }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) { die("no CUDA GPU: %s needs one", argv[0]); }
    CheckpointHeader ck;
    float* params = checkpoint_load_params(argv[1], -1, &ck);
    ModelConfig config = checkpoint_model(&ck);
    int B, T;
    int* tokens = logits_file_read_tokens(argv[2], &B, &T);
    if (T % 8 != 0 || T > config.max_seq_len) { die("token file '%s': T=%d must be a multiple of 8 and at most %d", argv[2], T, config.max_seq_len); }

    matmul_init();
    DataParallel dp;
    DPOptions one_rank = {-1, -1, NULL, RENDEZVOUS_TIMEOUT_S};
    dp_init(&dp, &one_rank);
    Model model;
    LinearOptions bf16 = {PREC_BF16, GEMM_PATH_EXACT, 0, 1, STRAT_PLAIN, 0, 1, 64};
    model_build(&model, &dp, &config, params, B, T, &bf16, 0);
    model_sync_params(&model);
    model_forward(&model, tokens, NULL, B, T, 0.0f);
    size_t rows = (size_t)B * T, Vp = (size_t)config.padded_vocab_size;
    floatX* lx = (floatX*)malloc_check(rows * Vp * sizeof(floatX));
    cudaCheck(cudaStreamSynchronize(model.stream));
    cudaCheck(cudaMemcpy(lx, model.acts.t[A_LOGITS], rows * Vp * sizeof(floatX), cudaMemcpyDeviceToHost));
    float* logits = (float*)malloc_check(rows * Vp * sizeof(float));
    for (size_t i = 0; i < rows * Vp; i++) { logits[i] = __bfloat162float(lx[i]); }
    logits_file_write(argv[3], logits, rows, config.vocab_size, config.padded_vocab_size);
    printf("%s logits (trainer, BF16) of %s for B=%d T=%d written to %s\n", family_names[config.family], argv[1], B, T, argv[3]);
    free(lx); free(logits); free(tokens); free(params);
    model_free(&model);
    matmul_free();
    dp_free(&dp);
    return 0;
}
