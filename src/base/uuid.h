/* Random RFC 4122 version-4 UUIDs: the default client id (private to the
 * library). */
#ifndef RELOCK__BASE_UUID_H
#define RELOCK__BASE_UUID_H

/* Writes a UUID such as "3b0c7c1e-8f0a-4d5e-9a41-0c2f6b7d8e90" (lowercase, 36
 * characters and a NUL) from the kernel's random source. Returns 0, or
 * RELOCK_EIO (out set to "") when no random bytes could be read. */
int relock__uuid_v4(char out[37]);

#endif /* RELOCK__BASE_UUID_H */
