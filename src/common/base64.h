// Base64 (RFC 4648, the standard alphabet with '=' padding): how an agent sends a replica's log
// bytes (which need not be UTF-8) inside JSON, and how the service reads them back.
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace estuary {

// The padded encoding of `bytes`.
std::string EncodeBase64(std::string_view bytes);

// The bytes `text` encodes; nullopt when it is not padded base64 (a length that is not a multiple
// of 4, a character outside the alphabet, or '=' anywhere but the last one or two places).
std::optional<std::string> DecodeBase64(std::string_view text);

}  // namespace estuary
