/* classify.h — what a pointer handed to free, realloc or
 * malloc_usable_size is (classify.c). */
#ifndef MT_AGENT_CLASSIFY_H
#define MT_AGENT_CLASSIFY_H

#include <stdint.h>

#include "agent/block.h"

enum { MT_BLK_OURS, MT_BLK_FREED, MT_BLK_FOREIGN, MT_BLK_UNMAPPED, MT_BLK_ARENA };

/* The kind of p (MT_BLK_*). Sets *hp for OURS and for FREED blocks whose
 * header survived, *tomb for FREED blocks known by their tombstone (the
 * header word it holds, size saturated: block.h's mt_tomb_open). May
 * make a system call (mincore, process_vm_readv) for pointers that could
 * be on a page already unmapped (edge.h). */
int mt_classify(void *p, mt_hdr **hp, uint64_t *tomb);
/* Counts and reports a double free (call "free") or a realloc of a freed
 * block (call "realloc"); kind, h and tomb as mt_classify gave them. */
void mt_report_bad_pointer(int kind, void *p, const mt_hdr *h, uint64_t tomb, const char *call);

#endif
