// BlobShelf: logs, outputs and input archives in the store's blob tables (blob_shelf.hpp).
#include "core/coordinator/blob_shelf.hpp"

#include "core/coordinator/internal.hpp"

namespace gpupool::coordinator {

Status BlobShelf::noted(Status st) {
    if (!st && store::is_fenced(st.error())) {
        m_fenced = true;
    }
    return st;
}

Result<store::LogAppend> BlobShelf::append_log(store::AttemptId attempt, std::int64_t offset, std::string_view data,
                                               std::int64_t cap) {
    auto appended = m_store.append_log(attempt, offset, data);
    if (!appended) {
        (void)noted(appended.error());
        return appended;
    }
    if (cap > 0 && appended->stored_bytes > 0 && appended->length > cap) {
        // Keep the head and the newest bytes; what lies wholly between goes.
        const std::int64_t head = detail::log_head_bytes(cap);
        if (auto st = noted(m_store.drop_log_range(attempt, head, appended->length - (cap - head))); !st) {
            return st.error();
        }
    }
    return appended;
}

Result<BlobShelf::LogRead> BlobShelf::read_log(store::AttemptId attempt, std::int64_t offset, std::int64_t max_bytes) {
    auto resume = m_store.log_resume_offset(attempt, offset);
    if (!resume) {
        return resume.error();
    }
    LogRead r;
    r.from = resume->value_or(offset);
    auto data = m_store.read_log(attempt, r.from, max_bytes);
    if (!data) {
        return data.error();
    }
    r.data = std::move(*data);
    if (auto len = m_store.log_length(attempt); len) {
        r.length = *len;
    }
    return r;
}

Status BlobShelf::put_output(store::AttemptId attempt, const std::filesystem::path& file, std::string_view sha256_hex) {
    return noted(m_store.put_output(attempt, file, sha256_hex));
}

Status BlobShelf::put_input(store::TeamId team, std::string_view sha256_hex, const std::filesystem::path& file,
                            std::int64_t now_ms) {
    return noted(m_store.put_input_blob(team, sha256_hex, file, now_ms));
}

} // namespace gpupool::coordinator
