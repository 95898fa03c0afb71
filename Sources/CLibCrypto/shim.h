// SPDX-License-Identifier: Apache-2.0
// libcrypto from Debian's libssl-dev: only the EVP AEAD and random-bytes APIs are used (AES-256-GCM sealing).
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/err.h>
