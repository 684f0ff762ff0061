// Errors. Every failure scatterx reports is a C++ exception derived from
// scatterx::Error, whose message reads
//     "<op>: <argument> <what was expected>, got <what was received>"
// The Python bindings map ArgumentError to ValueError, DTypeError to
// TypeError and IndexError to IndexError.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "ops/macros.h"

namespace scatterx {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A shape, dim, device, aliasing, option or value that the op does not accept.
class ArgumentError : public Error {
 public:
  using Error::Error;
};

// A dtype the op does not support, or dtypes that do not match.
class DTypeError : public Error {
 public:
  using Error::Error;
};

// An index value outside the dimension it indexes.
class IndexError : public Error {
 public:
  using Error::Error;
};

namespace detail {

template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

template <typename E, typename... Args>
[[noreturn]] void raise(const char* op, Args&&... args) {
  throw E(concat(op, ": ", std::forward<Args>(args)...));
}

}  // namespace detail
}  // namespace scatterx

// SCATTERX_CHECK(cond, ErrorType, op, message parts...): throws ErrorType with
// "op: message" when cond is false. The message parts are only formatted on
// failure.
#define SCATTERX_CHECK(cond, ErrorType, op, ...)                         \
  do {                                                                   \
    if (SCATTERX_UNLIKELY(!(cond))) {                                    \
      ::scatterx::detail::raise<::scatterx::ErrorType>(op, __VA_ARGS__); \
    }                                                                    \
  } while (0)
