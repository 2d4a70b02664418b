// Plain-text tables for people (ccloctl, cclo-run --table).
#pragma once

#include <string>
#include <vector>

namespace cclo::client {

/// Renders `header` and `rows` as left-aligned columns separated by two spaces, one line
/// per row, each ending in a newline. Rows shorter than the header leave cells empty.
std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

}  // namespace cclo::client
