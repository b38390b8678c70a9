#include <dcomm/dcomm.hpp>

#include "dcomm_config.h"

namespace dcomm {
const char* version() noexcept { return DCOMM_VERSION; }
}  // namespace dcomm
