// TEMPORARY stub (branch pg-store only): copy_pool is being written on main; this lets
// PostgresStore::backup link until it lands, and is dropped at the merge.
#include "core/store/copy_pool.hpp"

namespace gpupool::store {

Result<CopyReport> copy_pool(Store& /*from*/, Store& /*to*/, const CopyProgress& /*progress*/) {
    return make_error(ErrorCode::not_implemented, "copying a pool between stores has not landed yet");
}

} // namespace gpupool::store
