// The fused softmax cross-entropy with its gradient in place: the trainer's 16-byte-vector kernel
// (llmc/classifier.cuh) against the three-pass scalar one (dev/cuda/classifier_scalar.cuh), at the logits of d12 B64,
// d24 B32 and d48 B16 (T = 1024, GPT-2's padded vocabulary). GB/s counts one read and one write of the logits, the
// least any in-place kernel moves. Each run overwrites the logits with their gradient, so later runs see gradients
// as logits; the work per element does not depend on the values.
// Usage: build/bench_classifier [repeats]
#include "dev/cuda/bench_common.cuh"
#include "dev/cuda/classifier_scalar.cuh"

int main(int argc, char** argv) {
    int reps = bench_start(argc, argv);
    const int V = 50257, Vp = 50304;
    struct { const char* name; int N; } shapes[] = {{"d12 B64", 65536}, {"d24 B32", 32768}, {"d48 B16", 16384}};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        int N = shapes[s].N;
        long n = (long)N * Vp;
        floatX* logits = random_bf16(n, 1, 8.0f);
        int* targets = (int*)device_malloc((size_t)N * sizeof(int), "targets");
        cudaCheck(cudaMemset(targets, 0, (size_t)N * sizeof(int)));
        float* losses = (float*)device_malloc((size_t)N * sizeof(float), "losses");
        cudaCheck(cudaMemset(losses, 0, (size_t)N * sizeof(float)));
        float dloss = 1.0f / N;
        float scalar = time_ms([&] { softmax_crossentropy_scalar(logits, losses, targets, N, V, Vp, dloss, 0); }, reps);
        float trainer = time_ms([&] { softmax_crossentropy(logits, losses, targets, N, V, Vp, dloss, 0); }, reps);
        double gb = 2.0 * n * sizeof(floatX) / 1e9;
        printf("%s: %d x %d logits\n  softmax_crossentropy_scalar  %7.3f ms  %6.0f GB/s\n"
               "  softmax_crossentropy         %7.3f ms  %6.0f GB/s  %5.2fx\n",
               shapes[s].name, N, Vp, scalar, gb / scalar * 1e3, trainer, gb / trainer * 1e3, scalar / trainer);
        cudaCheck(cudaFree(logits));
        cudaCheck(cudaFree(targets));
        cudaCheck(cudaFree(losses));
    }
    matmul_free();
    return 0;
}
