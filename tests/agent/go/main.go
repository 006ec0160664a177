// A cgo program for tests/agent/test_go.sh: its C part allocates known
// amounts in category "go-c" (100 blocks of 1000 bytes, 50 of them freed),
// on goroutines' threads; then it leaves as Go programs do, by a raw
// exit_group (os.Exit with the status given as the first argument).
package main

/*
#include <stdlib.h>
#include <string.h>
#include "memtrail.h"

static void *kept[100];

static void work(void)
{
    mt_tag_push("go-c");
    for (int i = 0; i < 100; i++) {
        kept[i] = malloc(1000);
        memset(kept[i], i, 1000);
    }
    for (int i = 0; i < 100; i += 2)
        free(kept[i]);
    mt_tag_pop();
}
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

func main() {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { C.work(); wg.Done() }()
	wg.Wait()
	status := 0
	if len(os.Args) > 1 {
		status, _ = strconv.Atoi(os.Args[1])
	}
	fmt.Println("go: done")
	os.Exit(status)
}
