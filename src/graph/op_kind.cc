#include "graph/op_kind.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace lumen {
namespace {

constexpr std::array<const char*, kNumOpKinds> kOpNames = {
#define LUMEN_OP(name) #name,
#include "graph/op_kinds.def"
#undef LUMEN_OP
};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

const char* op_name(OpKind kind) {
  auto i = static_cast<size_t>(kind);
  return i < kOpNames.size() ? kOpNames[i] : "?";
}

std::optional<OpKind> op_kind_from_name(std::string_view name) {
  std::string want = lower(name);
  for (size_t i = 0; i < kOpNames.size(); ++i) {
    if (lower(kOpNames[i]) == want) return static_cast<OpKind>(i);
  }
  return std::nullopt;
}

}  // namespace lumen
