// BlobShelf: the bytes the coordinator keeps beside its state, in the store's blob tables: each
// attempt's log (appended by its worker and capped, read by researchers), each attempt's outputs
// archive, and each team's input archives.
//
// None of it is the components' state (token_book.hpp, worker_roster.hpp, job_book.hpp,
// credit_desk.hpp): a blob is written straight to the store, durable when the call returns, and
// needs no Coordinator::commit(). Whether a job may write or read a blob is its callers' to check
// (job_ops.hpp for researchers, worker_ops.hpp for workers); the shelf keeps the store's rules and
// one of its own, the log cap. A write the store refused because another coordinator holds the
// pool's lease (store::is_fenced) sets fenced(), which the coordinator reports as lost_lease().
// Not thread-safe: it is the coordinator's, and runs on its thread.
#pragma once

#include "core/store/store.hpp"
#include "core/util/result.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace gpupool::coordinator {

class BlobShelf {
public:
    explicit BlobShelf(store::Store& store) : m_store(store) {}

    // ---- logs ----
    // Appends `data` at byte `offset` of the attempt's log (store::Store::append_log: a repeated
    // chunk stores nothing, one past the end is refused), then holds the log within `cap` bytes (0:
    // no cap) by dropping the chunks wholly between its first log_head_bytes(cap) and its newest.
    Result<store::LogAppend> append_log(store::AttemptId attempt, std::int64_t offset, std::string_view data,
                                        std::int64_t cap);
    // Up to `max_bytes` of the attempt's log from `offset`, or from where its stored bytes resume
    // when `offset` fell in a dropped middle (`from` says where), and the log's length when the
    // store could say it.
    struct LogRead {
        std::int64_t from = 0;
        std::string data;
        std::optional<std::int64_t> length;
    };
    Result<LogRead> read_log(store::AttemptId attempt, std::int64_t offset, std::int64_t max_bytes);

    // ---- outputs and inputs ----
    // The attempt's outputs archive (replaced whole on a repeated upload); nullopt: none came.
    Status put_output(store::AttemptId attempt, const std::filesystem::path& file, std::string_view sha256_hex);
    Result<std::optional<std::string>> output(store::AttemptId attempt) { return m_store.get_output(attempt); }
    // A team's input archive by SHA-256 (hex); another team's is not found, as an unknown one.
    Status put_input(store::TeamId team, std::string_view sha256_hex, const std::filesystem::path& file,
                     std::int64_t now_ms);
    Result<std::optional<std::int64_t>> input_size(store::TeamId team, std::string_view sha256_hex) {
        return m_store.input_blob_size(team, sha256_hex);
    }
    Result<std::optional<std::string>> input(store::TeamId team, std::string_view sha256_hex) {
        return m_store.get_input_blob(team, sha256_hex);
    }
    // ---- evidence ----
    // One attempt's evidence by kind (store::EvidenceRecord; written through Coordinator::commit with
    // the changes it belongs to, read here one attempt at a time: evidence.hpp).
    Result<std::vector<store::EvidenceRecord>> evidence(store::AttemptId attempt) {
        return m_store.read_evidence(attempt);
    }
    // The largest blob the store keeps, in bytes (a larger one is refused).
    std::int64_t max_blob_bytes() const { return m_store.max_blob_bytes(); }

    // Whether a write was refused because another coordinator holds the pool's lease.
    bool fenced() const { return m_fenced; }

private:
    // Remembers a fenced refusal; returns `st` as it was.
    Status noted(Status st);

    store::Store& m_store;
    bool m_fenced = false;
};

} // namespace gpupool::coordinator
