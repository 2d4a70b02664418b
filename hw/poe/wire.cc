#include "hw/poe/wire.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cclo::hw::poe {
namespace {

template <typename T>
void Put(std::byte* out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<std::byte>(value >> (8 * i));
}

template <typename T>
T Get(const std::byte* in) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) value |= static_cast<T>(in[i]) << (8 * i);
  return value;
}

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("invalid segment header: ", what));
}

/// Control and credit segments belong to the session, not to a message.
absl::Status CheckNoMessage(const SegmentHeader& h) {
  if (h.src != 0 || h.dst != 0 || h.tag != 0 || h.sequence != 0) {
    return Invalid(absl::StrCat(SegmentTypeName(h.type), " segment carries src ", h.src, ", dst ",
                                h.dst, ", tag ", h.tag, ", sequence ", h.sequence,
                                "; all must be 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckHeaderOnly(const SegmentHeader& h) {
  if (h.length != 0 || h.offset != 0) {
    return Invalid(absl::StrCat(SegmentTypeName(h.type), " segment must be a bare header: offset ",
                                h.offset, ", length ", h.length));
  }
  return absl::OkStatus();
}

/// Whether segments of `type` carry the call signature where the offset would be.
bool CarriesCall(SegmentType type) {
  return type == SegmentType::kEagerData || type == SegmentType::kRequest;
}

void PutCall(std::byte* out, const CallSignature& call) {
  Put<uint8_t>(out + 0, static_cast<uint8_t>(call.collective));
  Put<uint8_t>(out + 1, static_cast<uint8_t>(call.datatype));
  Put<uint8_t>(out + 2, static_cast<uint8_t>(call.reduce_op));
  Put<uint8_t>(out + 3, call.algorithm);
  Put<uint32_t>(out + 4, call.root);
}

absl::StatusOr<CallSignature> GetCall(const std::byte* in) {
  const uint8_t collective = Get<uint8_t>(in + 0);
  const uint8_t datatype = Get<uint8_t>(in + 1);
  const uint8_t reduce_op = Get<uint8_t>(in + 2);
  // A nop sends nothing: no message is one's.
  if (collective == static_cast<uint8_t>(Collective::kNop) ||
      collective > static_cast<uint8_t>(kLastCollective) ||
      datatype > static_cast<uint8_t>(DataType::kFloat64) ||
      reduce_op > static_cast<uint8_t>(ReduceOp::kMin)) {
    return Invalid(absl::StrCat("call signature of collective ", collective, ", datatype ",
                                datatype, " and reduce op ", reduce_op, " names no call"));
  }
  const CallSignature call{.collective = static_cast<Collective>(collective),
                           .datatype = static_cast<DataType>(datatype),
                           .reduce_op = static_cast<ReduceOp>(reduce_op),
                           .algorithm = Get<uint8_t>(in + 3),
                           .root = Get<uint32_t>(in + 4)};
  // One encoding per call: any other would be refused as another call than its receive's,
  // described as the same one ("send/recv sent to send/recv").
  if (call != Canonical(call)) {
    return Invalid(absl::StrCat("call signature of collective ", collective, ", datatype ",
                                datatype, ", reduce op ", reduce_op, ", algorithm ", call.algorithm,
                                " and root ", call.root,
                                " is not a call's: point-to-point is send, fields its "
                                "collective does not use are 0"));
  }
  return call;
}

/// The rules of each segment type (wire.h), once the generic bounds hold.
absl::Status CheckType(const SegmentHeader& h) {
  switch (h.type) {
    case SegmentType::kEagerData:
      if (h.length != h.total) {  // its offset is 0: the call signature is there
        return Invalid(absl::StrCat("eager segment must carry its whole message: length ", h.length,
                                    ", total ", h.total));
      }
      return absl::OkStatus();
    case SegmentType::kControl:
      if (h.length == 0 || h.length > kMaxControlBytes) {
        return Invalid(absl::StrCat("control segment length ", h.length, " outside [1, ",
                                    kMaxControlBytes, "]"));
      }
      if (h.offset != 0 || h.total != h.length) {
        return Invalid(absl::StrCat("control segment must be whole: offset ", h.offset, ", length ",
                                    h.length, ", total ", h.total));
      }
      return CheckNoMessage(h);
    case SegmentType::kRequest:
    case SegmentType::kClearToSend:
      return CheckHeaderOnly(h);
    case SegmentType::kRendezvousData:
      if (h.length == 0) {
        return Invalid(
            absl::StrCat("empty rendezvous data segment in a message of ", h.total, " bytes"));
      }
      return absl::OkStatus();
    case SegmentType::kCredit:
      if (absl::Status status = CheckHeaderOnly(h); !status.ok()) return status;
      if (h.total > kMaxCredits) {
        return Invalid(
            absl::StrCat("credit segment returns ", h.total, " credits, more than ", kMaxCredits));
      }
      return CheckNoMessage(h);
  }
  return absl::OkStatus();
}

}  // namespace

EncodedHeader Encode(const SegmentHeader& header, uint8_t version) {
  EncodedHeader out{};
  std::byte* p = out.data();
  Put<uint32_t>(p + 0, kMagic);
  Put<uint8_t>(p + 4, version);
  Put<uint8_t>(p + 5, static_cast<uint8_t>(header.type));
  Put<uint16_t>(p + 6, 0);
  std::memcpy(p + 8, header.comm.data(), header.comm.size());
  Put<uint32_t>(p + 24, header.src);
  Put<uint32_t>(p + 28, header.dst);
  Put<uint32_t>(p + 32, header.tag);
  Put<uint32_t>(p + 36, header.length);
  Put<uint64_t>(p + 40, header.sequence);
  if (CarriesCall(header.type)) {
    PutCall(p + 48, header.call);
  } else {
    Put<uint64_t>(p + 48, header.offset);
  }
  Put<uint64_t>(p + 56, header.total);
  return out;
}

absl::StatusOr<SegmentHeader> Decode(const std::byte* data, size_t size) {
  if (data == nullptr || size < kHeaderBytes) {
    return Invalid(absl::StrCat("needs ", kHeaderBytes, " bytes, got ", size));
  }
  const uint32_t magic = Get<uint32_t>(data + 0);
  if (magic != kMagic) {
    return Invalid(absl::StrFormat("bad magic 0x%08x, expected 0x%08x", magic, kMagic));
  }
  const uint8_t version = Get<uint8_t>(data + 4);
  if (version != kWireVersion) {
    return Invalid(
        absl::StrCat("unsupported version ", version, ", this engine speaks ", kWireVersion));
  }
  const uint8_t type = Get<uint8_t>(data + 5);
  if (type < static_cast<uint8_t>(SegmentType::kEagerData) ||
      type > static_cast<uint8_t>(SegmentType::kCredit)) {
    return Invalid(absl::StrCat("segment type ", type, " is unknown"));
  }
  const uint16_t reserved = Get<uint16_t>(data + 6);
  if (reserved != 0) {
    return Invalid(absl::StrFormat("reserved field is 0x%04x, must be 0", reserved));
  }
  SegmentHeader h;
  h.type = static_cast<SegmentType>(type);
  std::memcpy(h.comm.data(), data + 8, h.comm.size());
  h.src = Get<uint32_t>(data + 24);
  h.dst = Get<uint32_t>(data + 28);
  h.tag = Get<uint32_t>(data + 32);
  h.length = Get<uint32_t>(data + 36);
  h.sequence = Get<uint64_t>(data + 40);
  if (CarriesCall(h.type)) {
    absl::StatusOr<CallSignature> call = GetCall(data + 48);
    if (!call.ok()) return call.status();
    h.call = *call;
  } else {
    h.offset = Get<uint64_t>(data + 48);
  }
  h.total = Get<uint64_t>(data + 56);
  if (h.length > kMaxSegmentBytes) {
    return Invalid(absl::StrCat("length ", h.length, " exceeds the maximum segment of ",
                                kMaxSegmentBytes, " bytes"));
  }
  if (h.offset > h.total || h.length > h.total - h.offset) {
    // Not [offset, offset + length): the sum may wrap around.
    return Invalid(absl::StrCat("segment of ", h.length, " bytes at offset ", h.offset,
                                " lies beyond the message total of ", h.total, " bytes"));
  }
  if (absl::Status status = CheckType(h); !status.ok()) return status;
  return h;
}

std::optional<ForeignHeader> DecodeForeign(const std::byte* data, size_t size) {
  if (data == nullptr || size < kHeaderBytes) return std::nullopt;
  EncodedHeader ours;
  std::memcpy(ours.data(), data, kHeaderBytes);
  Put<uint8_t>(ours.data() + 4, kWireVersion);
  absl::StatusOr<SegmentHeader> header = Decode(ours.data(), ours.size());
  const uint8_t version = Get<uint8_t>(data + 4);
  if (version == kWireVersion || !header.ok() || header->type != SegmentType::kControl) {
    return std::nullopt;
  }
  return ForeignHeader{.version = version, .header = *header};
}

std::string SegmentTypeName(SegmentType type) {
  switch (type) {
    case SegmentType::kEagerData:
      return "eager";
    case SegmentType::kControl:
      return "control";
    case SegmentType::kRequest:
      return "rendezvous request";
    case SegmentType::kClearToSend:
      return "clear-to-send";
    case SegmentType::kRendezvousData:
      return "rendezvous data";
    case SegmentType::kCredit:
      return "credit";
  }
  return absl::StrCat("type ", static_cast<int>(type));
}

std::string Describe(const SegmentHeader& h) {
  std::string text = absl::StrCat(
      SegmentTypeName(h.type), " src=", h.src, " dst=", h.dst, " tag=", h.tag, " seq=", h.sequence,
      " [", h.offset, ", ", h.offset + h.length, ") of ", h.total, " comm=", CommIdHex(h.comm));
  if (CarriesCall(h.type)) absl::StrAppend(&text, " call=", DescribeSignature(h.call));
  return text;
}

}  // namespace cclo::hw::poe
