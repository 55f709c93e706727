/*
 * sentry_app.c: the C side of the side-by-side benchmark (Harness/Peer/README.md). Built twice
 * by scripts/peer-bench.sh: with -DPEER_WITH_SENTRY, linked against sentry-native's static
 * libsentry (inproc backend), and without it, the same program with no SDK: its baseline. The
 * modes are peer-app's (Harness/Peer/Support/PeerRun.swift). Usage: sentry-app MODE DIR.
 */
#include "CPeer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef PEER_WITH_SENTRY
#include <sentry.h>

/* Acknowledges and drops every envelope, as peer-app's DiscardExporter. A transport of its own
 * rather than SENTRY_TRANSPORT=none's (none at all): without a transport, sentry-native
 * discards a crash's envelope instead of writing it to its database; with one, the crash
 * handler suspends it and the envelope is written to the run's directory, as in an app. */
static void peer_discard(sentry_envelope_t *envelope, void *state) {
    (void)state;
    sentry_envelope_free(envelope);
}

static void peer_start(const char *directory) {
    sentry_options_t *options = sentry_options_new();
    sentry_options_set_dsn(options, "https://public@127.0.0.1/1");
    sentry_options_set_database_path(options, directory);
    sentry_options_set_release(options, "peer@1.0");
    sentry_options_set_debug(options, 0);
    sentry_options_set_transport(options, sentry_transport_new(peer_discard));
    if (sentry_init(options) != 0) exit(3);
}

/* A clean exit as sentry-native asks for: sentry_close() first (ends the session). */
static void peer_stop(void) { sentry_close(); }
#else
static void peer_start(const char *directory) { (void)directory; }
static void peer_stop(void) {}
#endif

static void peer_sleep_ms(long ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s crash|init|idle|mem|handler DIR\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1], *directory = argv[2];
    if (strcmp(mode, "crash") == 0) {
        /* Crash to exit: start, then at once a null store on the main thread. */
        peer_start(directory);
        cpeer_fault();
    } else if (strcmp(mode, "init") == 0) {
        uint64_t before = cpeer_now_ns();
        peer_start(directory);
        uint64_t after = cpeer_now_ns();
        cpeer_print("init_ns", after - before);
        cpeer_newline();
    } else if (strcmp(mode, "idle") == 0) {
        /* A C program may sleep: sentry-native watches no thread for hangs by default. */
        peer_start(directory);
        peer_sleep_ms(100);
        cpeer_report_children_cpu();
    } else if (strcmp(mode, "mem") == 0) {
        peer_start(directory);
        peer_sleep_ms(2000);
        cpeer_report_memory();
    } else if (strcmp(mode, "handler") == 0) {
        /* The app's handler first; the SDK chains to it. sentry_init has nothing left running
         * once it returns; the same 200 ms as peer-app all the same. */
        cpeer_install_handler();
        peer_start(directory);
        peer_sleep_ms(200);
        cpeer_fault();
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    peer_stop();
    return 0;
}
