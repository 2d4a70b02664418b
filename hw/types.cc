#include "hw/types.h"

#include <fcntl.h>
#include <netdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hw/crypto.h"

namespace cclo::hw {
namespace {

constexpr std::array<std::string_view, 8> kDataTypeNames = {
    "int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"};
constexpr std::array<size_t, 8> kDataTypeSizes = {1, 1, 4, 8, 2, 2, 4, 8};
constexpr std::array<std::string_view, 4> kReduceOpNames = {"sum", "prod", "max", "min"};
constexpr std::array<std::string_view, 12> kCollectiveNames = {
    "nop",       "send",   "recv",           "bcast",    "allreduce", "scatter",
    "gather",    "allgather", "reduce",      "reduce_scatter", "alltoall", "barrier"};

constexpr std::array<std::string_view, 2> kProtocolNames = {"eager", "rendezvous"};

}  // namespace

size_t DataTypeSize(DataType type) { return kDataTypeSizes.at(static_cast<size_t>(type)); }

std::string_view DataTypeName(DataType type) {
  return kDataTypeNames.at(static_cast<size_t>(type));
}

std::string_view ReduceOpName(ReduceOp op) { return kReduceOpNames.at(static_cast<size_t>(op)); }

std::string_view CollectiveName(Collective collective) {
  return kCollectiveNames.at(static_cast<size_t>(collective));
}

namespace {

/// The value in [first, last] whose `name_of` is `name`, or the valid names.
template <typename Enum>
absl::StatusOr<Enum> ParseName(std::string_view name, Enum first, Enum last,
                               std::string_view (*name_of)(Enum)) {
  std::string valid;
  for (int value = static_cast<int>(first); value <= static_cast<int>(last); ++value) {
    const std::string_view candidate = name_of(static_cast<Enum>(value));
    if (candidate == name) return static_cast<Enum>(value);
    absl::StrAppend(&valid, valid.empty() ? "" : ", ", std::string(candidate));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", std::string(name), "' is not one of ", valid));
}

}  // namespace

absl::StatusOr<Collective> ParseCollective(std::string_view name) {
  return ParseName(name, Collective::kSend, kLastCollective, &CollectiveName);
}

absl::StatusOr<DataType> ParseDataType(std::string_view name) {
  return ParseName(name, DataType::kInt8, DataType::kFloat64, &DataTypeName);
}

std::string_view ProtocolName(Protocol protocol) {
  return kProtocolNames.at(static_cast<size_t>(protocol));
}

bool HasRoot(Collective collective) {
  return collective == Collective::kBcast || collective == Collective::kScatter ||
         collective == Collective::kGather || collective == Collective::kReduce;
}

bool Reduces(Collective collective) {
  return collective == Collective::kReduce || collective == Collective::kAllreduce ||
         collective == Collective::kReduceScatter;
}

CallSignature Canonical(const CallSignature& signature) {
  switch (signature.collective) {
    case Collective::kSend:
    case Collective::kRecv:
      return {.collective = Collective::kSend};
    case Collective::kNop:
      return {.collective = Collective::kNop};
    case Collective::kBarrier:
      return {.collective = Collective::kBarrier, .algorithm = signature.algorithm};
    default:
      break;
  }
  return {.collective = signature.collective,
          .datatype = signature.datatype,
          .reduce_op = Reduces(signature.collective) ? signature.reduce_op : ReduceOp::kSum,
          .algorithm = signature.algorithm,
          .root = HasRoot(signature.collective) ? signature.root : 0};
}

std::string DescribeSignature(const CallSignature& signature) {
  switch (signature.collective) {
    case Collective::kSend:
    case Collective::kRecv:
      return "send/recv";
    case Collective::kNop:
    case Collective::kBarrier:
      return std::string(CollectiveName(signature.collective));
    default:
      break;
  }
  std::string text = absl::StrCat(std::string(CollectiveName(signature.collective)), " of ",
                                  std::string(DataTypeName(signature.datatype)));
  if (Reduces(signature.collective)) {
    absl::StrAppend(&text, " (", std::string(ReduceOpName(signature.reduce_op)), ")");
  }
  if (HasRoot(signature.collective)) absl::StrAppend(&text, " from root ", signature.root);
  return text;
}

bool HasInPlace(Collective collective) {
  switch (collective) {
    case Collective::kScatter:
    case Collective::kGather:
    case Collective::kAllgather:
    case Collective::kReduce:
    case Collective::kAllreduce:
    case Collective::kReduceScatter:
    case Collective::kAlltoall:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  const std::string digits_text(text);
  std::string digits = digits_text;
  uint64_t unit = 1;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K':
      case 'k':
        unit = uint64_t{1} << 10;
        break;
      case 'M':
      case 'm':
        unit = uint64_t{1} << 20;
        break;
      case 'G':
      case 'g':
        unit = uint64_t{1} << 30;
        break;
    }
    if (unit != 1) digits.pop_back();
  }
  uint64_t value = 0;
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(digits, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", digits_text, "' is not a byte size (digits with an optional K, M or G)"));
  }
  if (value > std::numeric_limits<uint64_t>::max() / unit) {
    return absl::InvalidArgumentError(absl::StrCat("byte size '", digits_text, "' is too large"));
  }
  return value * unit;
}

std::string CommIdHex(const CommId& id) { return Hex(id.data(), id.size()); }

size_t Utf8Length(std::string_view text) {
  auto byte = [&text](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;  // the range of the second byte
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return 0;
  }
  return length;
}

absl::Status CheckUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const size_t length = byte < 0x80 ? 1 : Utf8Length(text.substr(i));
    if (length == 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("is not UTF-8 text (byte 0x%02x at offset %d)", byte, i));
    }
    i += length;
  }
  return absl::OkStatus();
}

std::string EscapeControl(std::string_view text, size_t max_bytes) {
  size_t kept = std::min(text.size(), max_bytes);
  // A UTF-8 character has at most 3 bytes after its first: a cut inside one moves to its start.
  for (int back = 0; back < 3 && kept > 0 && kept < text.size() &&
                     (static_cast<unsigned char>(text[kept]) & 0xc0) == 0x80;
       ++back) {
    --kept;
  }
  std::string out;
  for (size_t i = 0; i < kept; ++i) {
    const char c = text[i];
    const auto byte = static_cast<unsigned char>(c);
    const size_t character = byte < 0x80 ? 1 : Utf8Length(text.substr(i, kept - i));
    if (c == '\n') {
      out += "\\n";
    } else if (byte < 0x20 || byte == 0x7f || character == 0) {
      out += "\\x";
      out += Hex(&byte, 1);
    } else {
      out += text.substr(i, character);
      i += character - 1;
    }
  }
  if (kept < text.size()) absl::StrAppend(&out, "... (", text.size(), " bytes in all)");
  return out;
}

std::string HostPort(const std::string& host, uint16_t port) {
  if (host.find(':') == std::string::npos) return absl::StrCat(host, ":", port);
  return absl::StrCat("[", host, "]:", port);
}

bool PrintableWithoutSpaces(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

absl::Status CheckHostPort(std::string_view address) {
  constexpr size_t kMaxBytes = 300;
  if (address.size() > kMaxBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("address of ", address.size(), " bytes is longer than ", kMaxBytes));
  }
  const size_t colon = address.rfind(':');
  uint32_t port = 0;
  if (!PrintableWithoutSpaces(address) || colon == std::string_view::npos || colon == 0 ||
      address.find_first_not_of("0123456789", colon + 1) != std::string_view::npos ||
      !absl::SimpleAtoi(std::string(address.substr(colon + 1)), &port) || port == 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "address '", EscapeControl(address),
        "' is not host:port (printable characters without spaces, then a port from 1 to 65535)"));
  }
  return absl::OkStatus();
}

absl::Status ResolveFailure(const std::string& host, int rc) {
  const bool transient = rc == EAI_AGAIN || rc == EAI_SYSTEM || rc == EAI_MEMORY;
  return absl::Status(
      transient ? absl::StatusCode::kUnavailable : absl::StatusCode::kInvalidArgument,
      absl::StrCat("cannot resolve '", host, "': ", gai_strerror(rc)));
}

absl::StatusOr<std::string> ReadTextFile(const std::string& what, const std::string& path) {
  auto failed = [&](const std::string& why) {
    return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path, ": ", why));
  };
  // Non-blocking, so that a FIFO with no writer cannot hold the open.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return failed(std::strerror(errno));
  struct stat file {};
  absl::Status refused;
  if (fstat(fd, &file) != 0) {
    refused = failed(std::strerror(errno));
  } else if (S_ISDIR(file.st_mode)) {
    refused = failed(std::strerror(EISDIR));
  } else if (!S_ISREG(file.st_mode)) {
    refused = failed("not a regular file");
  }
  std::string text;
  char chunk[4096];
  while (refused.ok()) {
    const ssize_t got = read(fd, chunk, sizeof(chunk));
    if (got == 0) break;
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      refused = failed(std::strerror(errno));
    } else if (text.size() + static_cast<size_t>(got) > kMaxTextFileBytes) {
      refused = failed(absl::StrCat("longer than ", kMaxTextFileBytes, " bytes"));
    } else {
      text.append(chunk, static_cast<size_t>(got));
    }
  }
  close(fd);
  if (!refused.ok()) return refused;
  return text;
}

bool PausesAccepting(int error) {
  return error != EINTR && error != ECONNABORTED && error != EAGAIN && error != EWOULDBLOCK;
}

absl::Status StartThread(std::thread& thread, const std::string& what, std::function<void()> run) {
  try {
    thread = std::thread(std::move(run));
  } catch (const std::system_error& error) {
    return absl::UnavailableError(
        absl::StrCat("cannot start a thread for ", what, ": ", error.code().message()));
  }
  return absl::OkStatus();
}

}  // namespace cclo::hw
