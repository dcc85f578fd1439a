// CRC-32 checksums of byte ranges, the polynomial of zlib, gzip and PNG (reflected 0xEDB88320, so Python's
// zlib.crc32 gives the same value): table-driven, slicing by 8 bytes, plain C. Checkpoints checksum each section.
#ifndef LLMC_CRC32_H
#define LLMC_CRC32_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

// table[k][b]: the CRC of byte b followed by k zero bytes, built once
static inline const uint32_t (*crc32_tables(void))[256] {
    static uint32_t table[8][256];
    static int built = 0;
    if (!built) {
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t c = b;
            for (int k = 0; k < 8; k++) { c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1; }
            table[0][b] = c;
        }
        for (uint32_t b = 0; b < 256; b++) {
            for (int k = 1; k < 8; k++) { table[k][b] = (table[k - 1][b] >> 8) ^ table[0][table[k - 1][b] & 0xff]; }
        }
        built = 1;
    }
    return (const uint32_t (*)[256])table;
}

// the CRC of the bytes before data[0..n) (crc32_update(0, ...) starts a fresh one) extended by data[0..n)
static inline uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
    const uint32_t (*t)[256] = crc32_tables();
    const unsigned char* p = (const unsigned char*)data;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;   // little-endian hosts only, as the rest of the file formats
        c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
            t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0) { c = t[0][(c ^ *p++) & 0xff] ^ (c >> 8); }
    return ~c;
}

#endif
