#pragma once
/// dcomm: collective communication for C++ programs. Include this one header.

#include <dcomm/error.hpp>
#include <dcomm/init.hpp>
#include <dcomm/process_group.hpp>
#include <dcomm/store.hpp>
#include <dcomm/types.hpp>
#include <dcomm/work.hpp>

namespace dcomm {
/// The library's version, "0.1.0".
const char* version() noexcept;
}  // namespace dcomm
