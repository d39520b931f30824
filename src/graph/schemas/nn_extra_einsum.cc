// Parsing of Einsum equations (explicit and implicit outputs, repeated subscripts, '...').
#include "graph/schemas/nn_extra_einsum.h"

#include <algorithm>
#include <string>

namespace lumen {
namespace {

constexpr int kLetters = 52;

// 'a'..'z' -> 0..25, 'A'..'Z' -> 26..51, anything else -> -1.
int letter_id(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}

// ASCII order of a letter id, for the implicit output ('A' < 'Z' < 'a').
int ascii_of(int id) {
  return id < 26 ? 'a' + id : 'A' + (id - 26);
}

// One term of the equation: its letters, and where '...' sits among them (-1 if absent).
struct Term {
  std::vector<int> letters;
  int ellipsis_at = -1;
};

Term parse_term(const NodeContext& ctx, const std::string& text) {
  Term term;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '.') {
      if (text.compare(i, 3, "...") != 0 || term.ellipsis_at >= 0)
        ctx.fail_model("malformed '...' in einsum term '" + text + "'");
      term.ellipsis_at = static_cast<int>(term.letters.size());
      i += 2;
      continue;
    }
    int id = letter_id(c);
    if (id < 0) ctx.fail_model(std::string("invalid character '") + c + "' in einsum equation");
    term.letters.push_back(id);
  }
  return term;
}

}  // namespace

EinsumSpec einsum_spec(const NodeContext& ctx) {
  std::string eq;
  for (char c : ctx.attr_string("equation", "")) {
    if (c != ' ') eq.push_back(c);
  }
  if (eq.empty()) ctx.fail_model("attribute 'equation' is missing or empty");
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<Term> terms;
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    terms.push_back(parse_term(ctx, lhs.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (static_cast<int>(terms.size()) != ctx.num_inputs())
    ctx.fail_model("equation '" + eq + "' has " + std::to_string(terms.size()) +
                   " input terms but the node has " + std::to_string(ctx.num_inputs()) + " inputs");
  // Ellipsis ranks: each operand's, and the broadcast one.
  int ell_rank = 0;
  std::vector<int> ell_ranks(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    const Shape& s = ctx.input_shape(static_cast<int>(i));
    int letters = static_cast<int>(terms[i].letters.size());
    if (terms[i].ellipsis_at < 0 ? s.rank() != letters : s.rank() < letters)
      ctx.fail_shape("einsum term " + std::to_string(i) + " has " + std::to_string(letters) +
                     " subscripts but the operand has shape " + s.to_string());
    if (terms[i].ellipsis_at >= 0) ell_ranks[i] = s.rank() - letters;
    ell_rank = std::max(ell_rank, ell_ranks[i]);
  }
  EinsumSpec spec;
  // Label ids: letters keep their letter_id; ellipsis dim j (of ell_rank) is kLetters + j. They
  // are compacted at the end.
  std::vector<int64_t> sizes(kLetters + ell_rank, -1);
  std::vector<int> counts(kLetters, 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    const Term& t = terms[i];
    const Shape& s = ctx.input_shape(static_cast<int>(i));
    std::vector<int> labels;
    for (int k = 0; k < static_cast<int>(t.letters.size()); ++k) {
      if (k == t.ellipsis_at) {
        for (int j = 0; j < ell_ranks[i]; ++j)
          labels.push_back(kLetters + ell_rank - ell_ranks[i] + j);
      }
      labels.push_back(t.letters[k]);
      ++counts[t.letters[k]];
    }
    if (t.ellipsis_at == static_cast<int>(t.letters.size())) {
      for (int j = 0; j < ell_ranks[i]; ++j)
        labels.push_back(kLetters + ell_rank - ell_ranks[i] + j);
    }
    for (int a = 0; a < s.rank(); ++a) {
      int l = labels[a];
      int64_t d = s.dims()[a];
      int64_t& size = sizes[l];
      bool ellipsis_dim = l >= kLetters;
      if (size < 0 || (ellipsis_dim && size == 1)) {
        size = d;
      } else if (d != size && !(ellipsis_dim && d == 1)) {
        ctx.fail_shape("einsum dimension mismatch for subscript of operand " + std::to_string(i) +
                       " axis " + std::to_string(a) + ": " + std::to_string(d) + " vs " +
                       std::to_string(size));
      }
    }
    spec.operands.push_back(std::move(labels));
  }
  std::vector<int> out;
  if (arrow == std::string::npos) {
    for (int j = 0; j < ell_rank; ++j) out.push_back(kLetters + j);
    std::vector<int> once;
    for (int l = 0; l < kLetters; ++l) {
      if (counts[l] == 1) once.push_back(l);
    }
    std::sort(once.begin(), once.end(), [](int a, int b) { return ascii_of(a) < ascii_of(b); });
    out.insert(out.end(), once.begin(), once.end());
  } else {
    Term t = parse_term(ctx, eq.substr(arrow + 2));
    std::vector<bool> seen(kLetters, false);
    for (int k = 0; k <= static_cast<int>(t.letters.size()); ++k) {
      if (k == t.ellipsis_at) {
        for (int j = 0; j < ell_rank; ++j) out.push_back(kLetters + j);
      }
      if (k == static_cast<int>(t.letters.size())) break;
      int l = t.letters[k];
      if (counts[l] == 0)
        ctx.fail_model("einsum output subscript '" +
                       std::string(1, static_cast<char>(ascii_of(l))) + "' appears in no input");
      if (seen[l]) ctx.fail_model("einsum output repeats a subscript");
      seen[l] = true;
      out.push_back(l);
    }
  }
  // Compact the label ids to those used.
  std::vector<int> remap(sizes.size(), -1);
  for (size_t l = 0; l < sizes.size(); ++l) {
    if (sizes[l] >= 0) {
      remap[l] = static_cast<int>(spec.label_sizes.size());
      spec.label_sizes.push_back(sizes[l]);
    }
  }
  for (auto& labels : spec.operands) {
    for (int& l : labels) l = remap[l];
  }
  std::vector<int64_t> out_dims;
  for (int l : out) {
    spec.output.push_back(remap[l]);
    out_dims.push_back(sizes[l]);
  }
  spec.output_shape = Shape(out_dims);
  return spec;
}

}  // namespace lumen
