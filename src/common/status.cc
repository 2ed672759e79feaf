#include "common/status.h"

namespace estuary {

int Status::ExitCode() const {
  switch (code_) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kPermissionDenied: return 2;
    case StatusCode::kInternal:
    case StatusCode::kUnavailable: return 1;
  }
  return 1;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return message_;
}

}  // namespace estuary
