#include "client/table.h"

#include <algorithm>

#include "hw/types.h"

namespace cclo::client {

std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& raw_rows) {
  std::vector<std::vector<std::string>> rows;
  for (const std::vector<std::string>& row : raw_rows) {
    std::vector<std::string>& cells = rows.emplace_back();
    // A table shows what the operator asked for in full.
    for (const std::string& cell : row) {
      cells.push_back(hw::EscapeControl(cell, std::string_view::npos));
    }
  }
  std::vector<size_t> widths(header.size());
  for (size_t column = 0; column < header.size(); ++column) widths[column] = header[column].size();
  for (const std::vector<std::string>& row : rows) {
    for (size_t column = 0; column < std::min(row.size(), widths.size()); ++column) {
      widths[column] = std::max(widths[column], row[column].size());
    }
  }
  std::string out;
  auto append_line = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t column = 0; column < widths.size(); ++column) {
      const std::string cell = column < cells.size() ? cells[column] : "";
      line += cell;
      if (column + 1 < widths.size()) line.append(widths[column] - cell.size() + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  };
  append_line(header);
  for (const std::vector<std::string>& row : rows) append_line(row);
  return out;
}

}  // namespace cclo::client
