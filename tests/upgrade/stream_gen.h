/* Deterministic byte streams for the integrity test: a seeded generator
 * that the writer and the reader of one direction run in lockstep, so every
 * received byte is checked without storing what was sent, plus the small
 * PRNG that picks call kinds and sizes, and a running checksum.
 * Plain C, nothing from libvsock. */
#ifndef VSOCK_UPGRADE_STREAM_GEN_H
#define VSOCK_UPGRADE_STREAM_GEN_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64: small, fast, good enough for test data. */
uint64_t sg_next(uint64_t* state);
/* Uniform in [lo, hi] (hi - lo < 2^32). */
uint64_t sg_between(uint64_t* state, uint64_t lo, uint64_t hi);
/* 1 .. max, spread over magnitudes: as many small calls as large ones. */
size_t sg_size(uint64_t* state, size_t max);
/* Mixes a few values into one seed. */
uint64_t sg_seed(uint64_t a, uint64_t b, uint64_t c);

/* The data of one direction of one connection. */
struct sg_stream {
  uint64_t state;
  uint64_t word;
  unsigned left; /* unused bytes of `word` */
  uint64_t offset; /* bytes produced so far */
};
void sg_stream_init(struct sg_stream* s, uint64_t seed);
/* The next `len` bytes of the stream. */
void sg_stream_fill(struct sg_stream* s, unsigned char* out, size_t len);
/* Compares `len` received bytes with the stream's next bytes (and advances).
 * Returns the index of the first mismatch, or len when all match. */
size_t sg_stream_check(struct sg_stream* s, const unsigned char* in, size_t len);

/* FNV-1a, 64 bits, over everything fed to it. */
void sg_fnv(uint64_t* hash, const unsigned char* data, size_t len);
#define SG_FNV_INIT 0xcbf29ce484222325ULL

#endif
