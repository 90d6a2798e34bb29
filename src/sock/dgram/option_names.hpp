// Socket option numbers that older C library headers may lack (Linux's
// values, from its uapi headers): the timestamp options' old and new
// (64-bit time) forms, and UDP's segmentation options.
#pragma once
#include <sys/socket.h>

#ifndef SO_TIMESTAMP_OLD
#define SO_TIMESTAMP_OLD 29
#define SO_TIMESTAMPNS_OLD 35
#endif
#ifndef SO_TIMESTAMP_NEW
#define SO_TIMESTAMP_NEW 63
#define SO_TIMESTAMPNS_NEW 64
#endif
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
