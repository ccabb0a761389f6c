// copy_pool: records in one apply(), then logs, evidence, outputs, input archives, the audit log and samples;
// then the check that the copy is whole.
#include "core/store/copy_pool.hpp"

#include "core/util/files.hpp"
#include "core/util/sha256.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>

namespace gpupool::store {

namespace {

constexpr std::int64_t k_copy_piece_bytes = std::int64_t{4} << 20; // a log is copied 4 MiB at a time
constexpr std::int64_t k_audit_page = 10'000;

void say(const CopyProgress& progress, const std::string& line) {
    if (progress) {
        progress(line);
    }
}

Error copy_error(const Error& cause, const std::string& what) {
    Error e = cause;
    e.message = what + ": " + cause.message;
    return e;
}

// A dropped middle of a capped log is rebuilt as the same gap: a filler that reaches the next stored
// byte (append_log takes no gap), which is dropped once that byte is stored after it.
Status copy_log(Store& from, Store& to, AttemptId a, std::int64_t& bytes) {
    auto ranges = from.log_ranges(a);
    if (!ranges) {
        return ranges.error();
    }
    std::int64_t pos = 0;
    for (const LogRange& r : *ranges) {
        const std::int64_t gap_from = pos;
        if (r.from > pos) {
            const std::string filler(static_cast<std::size_t>(std::min(k_copy_piece_bytes, r.from - pos)), '\0');
            while (pos < r.from) {
                const auto n = std::min<std::int64_t>(r.from - pos, static_cast<std::int64_t>(filler.size()));
                if (auto st = to.append_log(a, pos, std::string_view(filler).substr(0, static_cast<std::size_t>(n)));
                    !st) {
                    return st.error();
                }
                pos += n;
            }
        }
        while (pos < r.to) {
            auto data = from.read_log(a, pos, std::min(k_copy_piece_bytes, r.to - pos));
            if (!data) {
                return data.error();
            }
            if (data->empty()) {
                return make_error(ErrorCode::internal, "the source's log of attempt " + std::to_string(a.value()) +
                                                           " ends early at byte " + std::to_string(pos));
            }
            if (auto st = to.append_log(a, pos, *data); !st) {
                return st.error();
            }
            pos += static_cast<std::int64_t>(data->size());
            bytes += static_cast<std::int64_t>(data->size());
        }
        if (r.from > gap_from) {
            if (auto st = to.drop_log_range(a, gap_from, r.from); !st) {
                return st;
            }
        }
    }
    return {};
}

// The bytes into a private temporary file, for the puts that read a file.
Result<util::TempFile> spill(const std::string& data) {
    auto file = util::TempFile::create(std::filesystem::temp_directory_path(), "gpupool-copy-", ".bin");
    if (!file) {
        return file.error();
    }
    std::ofstream out(file->path(), std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.close();
    if (!out) {
        return make_error(ErrorCode::io, "cannot write " + file->path().string());
    }
    return file;
}

Status copy_blobs(Store& from, Store& to, const Records& records, CopyReport& report) {
    for (const auto& a : records.attempts) {
        auto evidence = from.read_evidence(a.id);
        if (!evidence) {
            return evidence.error();
        }
        if (!evidence->empty()) {
            Changes c;
            c.evidence = std::move(*evidence);
            report.evidence += static_cast<std::int64_t>(c.evidence.size());
            if (auto st = to.apply(c); !st) {
                return copy_error(st.error(), "evidence of attempt " + std::to_string(a.id.value()));
            }
        }
        auto data = from.get_output(a.id);
        if (!data) {
            return data.error();
        }
        if (!*data) {
            continue;
        }
        auto file = spill(**data);
        if (!file) {
            return file.error();
        }
        if (auto st = to.put_output(a.id, file->path(), util::sha256_hex(**data)); !st) {
            return copy_error(st.error(), "outputs of attempt " + std::to_string(a.id.value()));
        }
        ++report.outputs;
    }
    auto blobs = from.list_input_blobs();
    if (!blobs) {
        return blobs.error();
    }
    for (const auto& b : *blobs) {
        auto data = from.get_input_blob(b.team, b.sha256_hex);
        if (!data) {
            return data.error();
        }
        if (!*data || util::sha256_hex(**data) != b.sha256_hex) {
            return make_error(ErrorCode::internal, "the source's input archive " + b.sha256_hex + " of team " +
                                                       std::to_string(b.team.value()) + " does not match its digest");
        }
        auto file = spill(**data);
        if (!file) {
            return file.error();
        }
        if (auto st = to.put_input_blob(b.team, b.sha256_hex, file->path(), b.created_at); !st) {
            return copy_error(st.error(), "input archive " + b.sha256_hex);
        }
        ++report.input_blobs;
    }
    return {};
}

// The whole audit log, oldest first.
Result<std::vector<AuditRecord>> whole_audit(Store& s) {
    std::vector<AuditRecord> all;
    AuditQuery q;
    q.limit = k_audit_page;
    while (true) {
        auto page = s.read_audit(q);
        if (!page) {
            return page.error();
        }
        all.insert(all.end(), page->begin(), page->end());
        if (static_cast<std::int64_t>(page->size()) < k_audit_page) {
            break;
        }
        q.before_id = page->back().id;
    }
    std::reverse(all.begin(), all.end());
    return all;
}

Status copy_appended(Store& from, Store& to, CopyReport& report) {
    auto audit = whole_audit(from);
    if (!audit) {
        return audit.error();
    }
    for (std::size_t i = 0; i < audit->size(); i += static_cast<std::size_t>(k_audit_page)) {
        Changes c;
        const auto end = std::min(audit->size(), i + static_cast<std::size_t>(k_audit_page));
        c.audit.assign(audit->begin() + static_cast<std::ptrdiff_t>(i), audit->begin() + static_cast<std::ptrdiff_t>(end));
        if (auto st = to.apply(c); !st) {
            return copy_error(st.error(), "audit log");
        }
    }
    report.audit_records = static_cast<std::int64_t>(audit->size());
    auto samples = from.read_samples(std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max());
    if (!samples) {
        return samples.error();
    }
    Changes c;
    c.samples = std::move(*samples);
    report.samples = static_cast<std::int64_t>(c.samples.size());
    if (auto st = to.apply(c); !st) {
        return copy_error(st.error(), "utilisation samples");
    }
    return {};
}

// ---- the check ----------------------------------------------------------------------------------

template <class R, class Key>
std::vector<R> sorted(std::vector<R> v, Key key) {
    std::sort(v.begin(), v.end(), [&](const R& a, const R& b) { return key(a) < key(b); });
    return v;
}

template <class R, class Key>
Status same(const char* kind, const std::vector<R>& a, const std::vector<R>& b, Key key) {
    if (a.size() != b.size()) {
        return make_error(ErrorCode::internal, std::string("the copy has ") + std::to_string(b.size()) + " " + kind +
                                                   ", the source " + std::to_string(a.size()));
    }
    const auto sa = sorted(a, key);
    const auto sb = sorted(b, key);
    for (std::size_t i = 0; i < sa.size(); ++i) {
        if (!(sa[i] == sb[i])) {
            return make_error(ErrorCode::internal, std::string("the copy's ") + kind + " differ from the source's at " +
                                                       std::to_string(key(sa[i])));
        }
    }
    return {};
}

Status same_records(const Records& a, const Records& b) {
    const auto id = [](const auto& r) { return r.id.value(); };
    const auto plain_id = [](const auto& r) { return r.id; };
    for (auto st : {same("teams", a.teams, b.teams, id), same("tokens", a.tokens, b.tokens, id),
                    same("workers", a.workers, b.workers, id), same("sweeps", a.sweeps, b.sweeps, id),
                    same("jobs", a.jobs, b.jobs, id), same("attempts", a.attempts, b.attempts, id),
                    same("ledger entries", a.ledger, b.ledger, plain_id), same("grants", a.grants, b.grants, plain_id)}) {
        if (!st) {
            return st;
        }
    }
    return {};
}

// The ledger of `r` balances: every balance is the sum of its account's entries, and all sum to zero.
Status ledger_balances(const Records& r) {
    std::map<credits::Account, credits::Micro> sums;
    for (const auto& e : r.ledger) {
        sums[e.debit] -= e.amount;
        sums[e.credit] += e.amount;
    }
    credits::Micro total = 0;
    for (const auto& b : r.balances) {
        total += b.balance;
        const auto it = sums.find(b.account);
        if ((it == sums.end() ? 0 : it->second) != b.balance) {
            return make_error(ErrorCode::internal, "the copy's balance of " + credits::to_string(b.account) +
                                                       " is not the sum of its entries");
        }
    }
    if (total != 0) {
        return make_error(ErrorCode::internal, "the copy's balances do not sum to zero");
    }
    return {};
}

Status verify(Store& from, Store& to, const Records& source) {
    auto copied = to.load();
    if (!copied) {
        return copied.error();
    }
    if (auto st = same_records(source, *copied); !st) {
        return st;
    }
    if (auto st = ledger_balances(*copied); !st) {
        return st;
    }
    for (const auto& a : source.attempts) {
        auto ra = from.log_ranges(a.id);
        auto rb = to.log_ranges(a.id);
        if (!ra || !rb) {
            return !ra ? ra.error() : rb.error();
        }
        if (*ra != *rb) {
            return make_error(ErrorCode::internal,
                              "the copy's log of attempt " + std::to_string(a.id.value()) + " differs from the source's");
        }
    }
    auto ba = from.list_input_blobs();
    auto bb = to.list_input_blobs();
    if (!ba || !bb) {
        return !ba ? ba.error() : bb.error();
    }
    if (*ba != *bb) {
        return make_error(ErrorCode::internal, "the copy's input archives differ from the source's");
    }
    return {};
}

} // namespace

Result<CopyReport> copy_pool(Store& from, Store& to, const CopyProgress& progress) {
    auto existing = to.load();
    if (!existing) {
        return existing.error();
    }
    if (!existing->teams.empty() || !existing->tokens.empty() || !existing->jobs.empty()) {
        return make_error(ErrorCode::conflict, "the target already holds a pool (" +
                                                   std::to_string(existing->teams.size()) + " teams, " +
                                                   std::to_string(existing->jobs.size()) +
                                                   " jobs); a copy goes into an empty store only");
    }
    auto records = from.load();
    if (!records) {
        return records.error();
    }
    CopyReport report;
    report.teams = static_cast<std::int64_t>(records->teams.size());
    report.tokens = static_cast<std::int64_t>(records->tokens.size());
    report.workers = static_cast<std::int64_t>(records->workers.size());
    report.sweeps = static_cast<std::int64_t>(records->sweeps.size());
    report.jobs = static_cast<std::int64_t>(records->jobs.size());
    report.attempts = static_cast<std::int64_t>(records->attempts.size());
    report.ledger_entries = static_cast<std::int64_t>(records->ledger.size());
    report.grants = static_cast<std::int64_t>(records->grants.size());
    if (auto st = to.apply(*records); !st) {
        return copy_error(st.error(), "records");
    }
    say(progress, "copied " + std::to_string(report.jobs) + " jobs, " + std::to_string(report.attempts) +
                      " attempts and " + std::to_string(report.ledger_entries) + " ledger entries");
    std::int64_t done = 0;
    for (const auto& a : records->attempts) {
        if (auto st = copy_log(from, to, a.id, report.log_bytes); !st) {
            return copy_error(st.error(), "log of attempt " + std::to_string(a.id.value()));
        }
        if (++done % 1000 == 0) {
            say(progress, "copied the logs of " + std::to_string(done) + " of " + std::to_string(report.attempts) +
                              " attempts");
        }
    }
    if (auto st = copy_blobs(from, to, *records, report); !st) {
        return st.error();
    }
    if (auto st = copy_appended(from, to, report); !st) {
        return st.error();
    }
    say(progress, "checking the copy");
    if (auto st = verify(from, to, *records); !st) {
        return st.error();
    }
    return report;
}

} // namespace gpupool::store
