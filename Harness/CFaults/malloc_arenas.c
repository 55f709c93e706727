/*
 * malloc_arenas.c: NORMAL-TIME CODE, test-only. How many malloc arenas the process has, from
 * glibc's malloc_info (one <heap> element each), for the tests of what Aftermath's threads cost.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "CHarnessFaults.h"

int aft_test_malloc_arenas(void) {
    char *text = NULL;
    size_t size = 0;
    FILE *stream = open_memstream(&text, &size);
    if (stream == NULL) return -1;
    int rc = malloc_info(0, stream);
    fclose(stream);
    if (rc != 0 || text == NULL) {
        free(text);
        return -1;
    }
    int count = 0;
    for (const char *at = text; (at = strstr(at, "<heap nr=")) != NULL; at++) count++;
    free(text);
    return count;
}
