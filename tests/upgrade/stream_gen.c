#include "stream_gen.h"

uint64_t sg_next(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t sg_between(uint64_t* state, uint64_t lo, uint64_t hi) {
  return lo + sg_next(state) % (hi - lo + 1);
}

size_t sg_size(uint64_t* state, size_t max) {
  unsigned bits = 0;
  while (bits < 63 && ((size_t)1 << (bits + 1)) <= max) bits++;
  size_t cap = (size_t)1 << sg_between(state, 0, bits);  /* 1, 2, 4 ... <= max */
  if (cap > max) cap = max;
  return (size_t)sg_between(state, 1, cap);
}

uint64_t sg_seed(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t s = a;
  s ^= sg_next(&s) + b;
  s ^= sg_next(&s) + c;
  return sg_next(&s);
}

void sg_stream_init(struct sg_stream* s, uint64_t seed) {
  s->state = seed;
  s->word = 0;
  s->left = 0;
  s->offset = 0;
}

static unsigned char next_byte(struct sg_stream* s) {
  if (s->left == 0) {
    s->word = sg_next(&s->state);
    s->left = 8;
  }
  unsigned char b = (unsigned char)s->word;
  s->word >>= 8;
  s->left--;
  return b;
}

void sg_stream_fill(struct sg_stream* s, unsigned char* out, size_t len) {
  for (size_t i = 0; i < len; i++) out[i] = next_byte(s);
  s->offset += len;
}

size_t sg_stream_check(struct sg_stream* s, const unsigned char* in, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if (in[i] != next_byte(s)) {
      s->offset += i;
      return i;
    }
  }
  s->offset += len;
  return len;
}

void sg_fnv(uint64_t* hash, const unsigned char* data, size_t len) {
  uint64_t h = *hash;
  for (size_t i = 0; i < len; i++) {
    h ^= data[i];
    h *= 0x100000001b3ULL;
  }
  *hash = h;
}
