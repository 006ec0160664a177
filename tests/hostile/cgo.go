// cgo.go — a hostile program for the agent: a Go program calling C's
// malloc, calloc, realloc and free through cgo from 8 goroutines (on
// threads the Go runtime starts itself, with its own signal handlers
// installed over the agent's); prints a checksum of the data.
package main

/*
#include <stdlib.h>
#include <string.h>

static unsigned long churn(int id, int n) {
	unsigned long sum = 0;
	char *keep[16] = {0};
	for (int i = 0; i < n; i++) {
		int slot = i % 16;
		size_t sz = 1 + (size_t)((i * 2654435761u + id) % 3000);
		if (i % 4 == 0) {
			keep[slot] = realloc(keep[slot], sz);
		} else {
			free(keep[slot]);
			keep[slot] = (i % 4 == 1) ? calloc(1, sz) : malloc(sz);
		}
		keep[slot][0] = (char)(i & 0x7f);
		sum += (unsigned char)keep[slot][0];
	}
	for (int k = 0; k < 16; k++)
		free(keep[k]);
	return sum;
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

func main() {
	var wg sync.WaitGroup
	sums := make([]uint64, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			for round := 0; round < 20; round++ {
				sums[id] += uint64(C.churn(C.int(id), 1000))
				p := C.malloc(100)
				C.memset(p, C.int(id), 100)
				sums[id] += uint64(*(*byte)(unsafe.Pointer(p)))
				C.free(p)
			}
		}(g)
	}
	wg.Wait()
	cs := C.CString("cgo")
	fmt.Println("sums", sums, C.GoString(cs))
	C.free(unsafe.Pointer(cs))
}
