#include "dist/agreement.h"

#include <sstream>

#include "ops/error.h"

namespace scatterx::dist::agreement {

std::vector<int64_t> gather_records(const std::vector<int64_t>& mine, const Communicator& comm) {
  const auto fields = static_cast<int64_t>(mine.size());
  std::vector<int64_t> every(static_cast<size_t>(comm.size() * fields));
  all_gather_into_tensor(TensorView(every.data(), DType::Int64, {comm.size(), fields}),
                         TensorView(const_cast<int64_t*>(mine.data()), DType::Int64, {fields}), comm);
  return every;
}

void raise_mismatches(const char* op, const std::vector<int64_t>& every, int world,
                      const std::function<std::string(int64_t)>& name) {
  const auto fields = static_cast<int64_t>(every.size()) / world;
  std::ostringstream failed;
  for (int r = 0; r < world; ++r)
    if (every[r * fields] != 0) failed << (failed.tellp() > 0 ? ", " : "") << r;
  if (failed.tellp() > 0)
    scatterx::detail::raise<MismatchError>(op, "rank(s) [", failed.str(),
                                           "] of the group failed their argument checks (their own errors say why)");
  for (int64_t i = 1; i < fields; ++i) {
    bool same = true;
    for (int r = 1; r < world; ++r) same = same && every[r * fields + i] == every[i];
    if (same) continue;
    std::ostringstream got;
    for (int r = 0; r < world; ++r) got << (r ? ", " : "") << "rank " << r << ": " << every[r * fields + i];
    scatterx::detail::raise<MismatchError>(op, "expected every rank to use the same ", name(i), ", got ", got.str());
  }
}

}  // namespace scatterx::dist::agreement
