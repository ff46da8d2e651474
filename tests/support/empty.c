/* Keeps the test-support library non-empty. */
typedef int attn__testsupport_empty;
