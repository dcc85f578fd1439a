// Host-side grouping of the positions of a micro-batch by token, for the deterministic embedding backward.
#ifndef LLMC_TOKEN_GROUPS_H
#define LLMC_TOKEN_GROUPS_H

#include <string.h>

// Host-side grouping of positions by token (a stable counting sort): tokens[u] is the u-th distinct token
// in increasing order, positions[offsets[u] .. offsets[u+1]) the positions that hold it.
// Returns the number of distinct tokens. counts must have room for V ints; offsets for BT+1.
static inline int encoder_group_positions(const int* inp, int BT, int V, int* counts, int* tokens, int* offsets,
                                          int* positions) {
    memset(counts, 0, (size_t)V * sizeof(int));
    for (int i = 0; i < BT; i++) { counts[inp[i]]++; }
    int u = 0, start = 0;
    for (int v = 0; v < V; v++) {
        if (counts[v] == 0) { continue; }
        tokens[u] = v;
        offsets[u] = start;
        int n = counts[v];
        counts[v] = start;   // becomes the write cursor for this token
        start += n;
        u++;
    }
    offsets[u] = start;
    for (int i = 0; i < BT; i++) { positions[counts[inp[i]]++] = i; }
    return u;
}

#endif
