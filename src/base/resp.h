/* Formats commands in RESP, the Redis wire protocol: an array of bulk
 * strings. Used for every command the library builds itself. */
#ifndef RELOCK__BASE_RESP_H
#define RELOCK__BASE_RESP_H

#include <stddef.h>

/* Bytes needed for argc arguments of the given lengths. */
size_t relock__resp_size(int argc, const size_t *lens);

/* Writes the command into dst (relock__resp_size bytes); returns the size. */
size_t relock__resp_write(char *dst, int argc, const char *const *argv, const size_t *lens);

#endif /* RELOCK__BASE_RESP_H */
