/* splitmix64 (Steele, Lea and Flood), once: its finaliser hashes keys (the state's file and chunk
 * tables, the page cache), and the generator draws the offsets of random patterns. */
#ifndef DBT_MIX_H
#define DBT_MIX_H

#include <stdint.h>

static inline uint64_t dbt_mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The next value of the sequence whose state is *x. */
static inline uint64_t dbt_splitmix64(uint64_t *x) {
    *x += 0x9e3779b97f4a7c15ull;
    return dbt_mix64(*x);
}

#endif
