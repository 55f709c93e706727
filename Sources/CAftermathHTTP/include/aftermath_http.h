/* One HTTP POST through libcurl, and gzip through zlib, for the OTLP/HTTP exporter.
 *
 * Normal (not crash-time) code. Whatever the peer sends, a call returns: a cut, malformed or
 * endless response is an error code, never a trap. Redirects are not followed here: the caller
 * decides (it must not turn a POST into a GET, nor send credentials to another origin). */
#ifndef AFTERMATH_HTTP_H
#define AFTERMATH_HTTP_H

#include <stddef.h>
#include <stdint.h>

#define AFT_HTTP_LOCATION_CAPACITY 2048
#define AFT_HTTP_ERROR_CAPACITY 256
#define AFT_HTTP_CONTENT_TYPE_CAPACITY 128
#define AFT_HTTP_RETRY_AFTER_CAPACITY 64
/* Response header bytes accepted at most, all lines together. */
#define AFT_HTTP_MAX_HEADER_BYTES (64 * 1024)

typedef struct aft_http_request {
    const char *url;
    /* "Name: value" lines. */
    const char *const *headers;
    size_t header_count;
    const uint8_t *body;
    size_t body_size;
    /* The whole exchange (connect, send, receive), in milliseconds; at least 1. */
    long timeout_ms;
    /* Response body bytes kept at most; a longer body ends the transfer (body_truncated). */
    size_t max_body;
    /* PEM file of the certificates trusted for https; NULL: the system's. */
    const char *ca_file;
} aft_http_request;

typedef struct aft_http_response {
    /* The final status, or 0 when no complete status line and headers arrived. */
    long status;
    /* 1 once the response's headers were complete. */
    int headers_complete;
    /* The redirect target resolved against the request URL; "" when none. */
    char location[AFT_HTTP_LOCATION_CAPACITY];
    /* The Retry-After header's value, as sent; "" when absent. */
    char retry_after[AFT_HTTP_RETRY_AFTER_CAPACITY];
    char content_type[AFT_HTTP_CONTENT_TYPE_CAPACITY];
    /* The body (malloc'd; aft_http_response_free releases it), at most max_body bytes. */
    uint8_t *body;
    size_t body_size;
    /* 1 when the body was longer than max_body and the transfer was ended. */
    int body_truncated;
    /* 0 when the transfer completed; else libcurl's error code, described in error. */
    int transport_error;
    /* 1 when the transport error is the timeout. */
    int timed_out;
    char error[AFT_HTTP_ERROR_CAPACITY];
} aft_http_response;

/* Sends one POST and fills response. Returns 0 when a transfer was attempted (look at
 * response), -1 when the request could not even be prepared (response->error says why). */
int aft_http_post(const aft_http_request *request, aft_http_response *response);

/* Releases response->body. */
void aft_http_response_free(aft_http_response *response);

/* gzip (RFC 1952) of in into out. Returns the compressed size, or 0 when out is too small or
 * zlib failed. aft_gzip_bound(n) bytes always suffice. */
size_t aft_gzip(const uint8_t *in, size_t in_size, uint8_t *out, size_t out_capacity);
size_t aft_gzip_bound(size_t in_size);

#endif
