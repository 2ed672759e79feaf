// Status and StatusOr: how estuary reports errors that come from the outside world (files, flags,
// the network). Outcomes of scheduling ("does not fit") are data, never a Status.
//
// A Status is either OK or carries a code and a one-line message. For bad input the message names
// the file, line and field, e.g. "pods.csv:12: column 'gpu_milli': value 1200 exceeds 1000".
// Thread-safety: value types; safe to copy between threads.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace estuary {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad input from a file, flag or request (exit code 2)
  kNotFound,         // a named thing (file, node, policy) does not exist (exit code 2)
  kInternal,         // a bug or an environment failure (exit code 1)
  kPermissionDenied, // the caller may not do this (the service's 403; exit code 2)
  kUnavailable,      // not now: a limit was hit or the service is stopping (429 / 503; exit code 1)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The process exit code the CLI uses for this status: 0, 2 for bad input, 1 otherwise.
  int ExitCode() const;
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
inline Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
inline Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
inline Status PermissionDenied(std::string msg) { return {StatusCode::kPermissionDenied, std::move(msg)}; }
inline Status Unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  StatusOr(Status status) : status_(std::move(status)) {   // NOLINT(google-explicit-constructor)
    assert(!status_.ok() && "StatusOr built from an OK status");
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  // REQUIRES: ok().
  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace estuary

// Assigns the value of a StatusOr expression to `lhs`, or returns its Status.
#define ESTUARY_ASSIGN_OR_RETURN(lhs, expr) \
  do {                                       \
    auto _sor = (expr);                      \
    if (!_sor.ok()) return _sor.status();    \
    lhs = *_sor;                             \
  } while (0)

// Propagates a non-OK Status from an expression returning Status.
#define ESTUARY_RETURN_IF_ERROR(expr)        \
  do {                                       \
    ::estuary::Status _st = (expr);          \
    if (!_st.ok()) return _st;               \
  } while (0)
