// The version of cclod, reported by ccloctl status and cclod_build_info.
#pragma once

namespace cclo::daemon {

inline constexpr char kVersion[] = "0.1.0";

}  // namespace cclo::daemon
