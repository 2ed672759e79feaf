// The OpenAPI 3 document of the service's HTTP API (served at /v1/openapi.json).
#pragma once

#include <string_view>

namespace estuary {

// A complete, valid JSON document describing every route of HttpApi (server/http_api.h).
std::string_view OpenApiDocument();

}  // namespace estuary
