// Plain-text tables for people (ccloctl, cclo-run --table).
#pragma once

#include <string>
#include <vector>

namespace cclo::client {

/// Renders `header` and `rows` as left-aligned columns separated by two spaces, one line
/// per row, each ending in a newline. Rows shorter than the header leave cells empty.
/// Control characters in a cell (which may come from another daemon's message) are shown
/// escaped, \n or \xHH, so that they neither break the lines nor reach the terminal.
std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

}  // namespace cclo::client
