// TokenBook on its own: staged changes change nothing until absorbed; lookups by secret, id, name and
// label; the rules for new teams and member names; first_difference finds what differs.
#include "core/util/token_secret.hpp"
#include "core/coordinator/token_book.hpp"

#include <catch2/catch.hpp>

namespace gpupool::coordinator::test_token_book {
namespace {

using store::Role;

store::TeamRecord team(std::int64_t id, const std::string& name) {
    return {TeamId(id), name, 1, 0, std::nullopt, std::nullopt};
}

// A book with teams fellows (1) and owners (2), an admin token and two fellows' member tokens.
struct Book {
    TokenBook book;
    IssuedToken admin, alice, bob;
    Book() {
        store::Changes c;
        c.teams = {team(1, "fellows"), team(2, "owners")};
        admin = TokenBook::stage_token(TokenId(1), Role::admin, std::nullopt, std::nullopt, "root", 10, c).value();
        alice = TokenBook::stage_token(TokenId(2), Role::member, TeamId(1), std::nullopt, "alice", 11, c).value();
        bob = TokenBook::stage_token(TokenId(3), Role::member, TeamId(1), std::nullopt, "bob", 12, c).value();
        book.absorb(c);
    }
};

} // namespace

TEST_CASE("token book: a staged token is nothing until absorbed, then found by its secret and id",
          "[coordinator][components][token_book]") {
    TokenBook book;
    store::Changes c;
    auto t = TokenBook::stage_token(TokenId(7), Role::admin, std::nullopt, std::nullopt, "root", 5, c);
    REQUIRE(t.has_value());
    CHECK(t->secret.starts_with("gpp_"));
    REQUIRE(c.tokens.size() == 1);
    CHECK(c.tokens[0].hash == util::sha256_hex(t->secret)); // the secret itself is never kept
    CHECK(c.tokens[0].hash != t->secret);
    CHECK(book.live_token(t->secret) == nullptr);
    CHECK_FALSE(book.has_admin());
    book.absorb(c);
    REQUIRE(book.live_token(t->secret) != nullptr);
    CHECK(book.live_token(t->secret)->id == TokenId(7));
    CHECK(book.token(TokenId(7))->label == "root");
    CHECK(book.has_admin());
    CHECK(book.live_token("gpp_" + std::string(64, '0')) == nullptr);
}

TEST_CASE("token book: a revoked token no longer authenticates and the admin is gone with it",
          "[coordinator][components][token_book]") {
    Book b;
    store::Changes c;
    auto revoked = b.book.stage_revoke(TokenId(1), 99, c);
    REQUIRE(revoked.has_value());
    CHECK(revoked->revoked_at == 99);
    CHECK(b.book.live_token(b.admin.secret) != nullptr); // staged only
    b.book.absorb(c);
    CHECK(b.book.live_token(b.admin.secret) == nullptr);
    CHECK_FALSE(b.book.has_admin());
    CHECK(b.book.token(TokenId(1)) != nullptr); // still listed, as revoked
    store::Changes none;
    auto missing = b.book.stage_revoke(TokenId(42), 99, none);
    REQUIRE_FALSE(missing.has_value());
    CHECK(missing.error().code == ErrorCode::not_found);
    CHECK(none.tokens.empty());
}

TEST_CASE("token book: names, labels and lists", "[coordinator][components][token_book]") {
    Book b;
    CHECK(b.book.team_name(TeamId(2)) == "owners");
    CHECK(b.book.team_name(TeamId(9)) == "9");
    CHECK(b.book.token_name(TokenId(2)) == "alice");
    CHECK(b.book.token_name(TokenId(9)) == "token 9");
    CHECK(b.book.team_named("owners").value().value() == 2);
    CHECK(b.book.team_named("2").value().value() == 2);
    auto unknown = b.book.team_named("owner");
    REQUIRE_FALSE(unknown.has_value());
    CHECK(unknown.error().code == ErrorCode::not_found);
    CHECK(unknown.error().message.find("owners") != std::string::npos); // the nearest name
    CHECK(b.book.team_ids({"owners", "nobody", "fellows"}) == std::vector<TeamId>{TeamId(1), TeamId(2)});
    const auto all = b.book.listed(std::nullopt);
    REQUIRE(all.size() == 3);
    CHECK(all[0].id == TokenId(1));
    CHECK(all[2].id == TokenId(3));
    CHECK(all[0].hash.empty()); // lists never carry hashes
    CHECK(b.book.listed(TeamId(2)).empty());
    const auto members = b.book.members_of(TeamId(1));
    REQUIRE(members.size() == 2);
    CHECK(members[0]->label == "alice");
}

TEST_CASE("token book: a member is named by id or by a label only one live token has",
          "[coordinator][components][token_book]") {
    Book b;
    CHECK(b.book.member_token(TeamId(1), "bob").value()->id == TokenId(3));
    CHECK(b.book.member_token(TeamId(1), "2").value()->id == TokenId(2));
    auto other_team = b.book.member_token(TeamId(2), "bob");
    REQUIRE_FALSE(other_team.has_value());
    CHECK(other_team.error().code == ErrorCode::not_found);
    CHECK(other_team.error().field == "member");
    store::Changes c;
    REQUIRE(TokenBook::stage_token(TokenId(4), Role::member, TeamId(1), std::nullopt, "bob", 13, c).has_value());
    b.book.absorb(c);
    auto twice = b.book.member_token(TeamId(1), "bob");
    REQUIRE_FALSE(twice.has_value());
    CHECK(twice.error().code == ErrorCode::invalid_input);
    CHECK(twice.error().message.find("2 member tokens") != std::string::npos);
    store::Changes revoke;
    REQUIRE(b.book.stage_revoke(TokenId(3), 20, revoke).has_value());
    b.book.absorb(revoke);
    CHECK(b.book.member_token(TeamId(1), "bob").value()->id == TokenId(4)); // revoked ones do not count
}

TEST_CASE("token book: the rules for a new team", "[coordinator][components][token_book]") {
    Book b;
    CHECK(b.book.check_new_team("interp-2", 5));
    CHECK(b.book.check_new_team("", 1).error().field == "name");
    CHECK(b.book.check_new_team("a b", 1).error().field == "name");
    CHECK(b.book.check_new_team(std::string(65, 'a'), 1).error().field == "name");
    CHECK(b.book.check_new_team("x", 0).error().field == "weight");
    CHECK(b.book.check_new_team("x", 1001).error().field == "weight");
    CHECK(b.book.check_new_team("owners", 1).error().code == ErrorCode::conflict);
}

TEST_CASE("token book: first_difference names what a rebuild does not have, and last uses do not count",
          "[coordinator][components][token_book]") {
    Book b;
    TokenBook copy = b.book;
    b.book.note_used(TokenId(2), 500);
    CHECK(b.book.last_used(TokenId(2)) == 500);
    CHECK_FALSE(copy.last_used(TokenId(2)).has_value());
    CHECK_FALSE(b.book.first_difference(copy).has_value());
    CHECK(b.book == copy);
    store::Changes c;
    c.teams = {team(1, "fellows-renamed")};
    copy.absorb(c);
    CHECK(b.book.first_difference(copy) == "team 1 differs");
    store::Changes more;
    more.teams = {team(3, "new")};
    b.book.absorb(more);
    CHECK(copy.first_difference(b.book) == "team 1 differs");
    TokenBook empty;
    CHECK(empty.first_difference(b.book) == "team 1 missing");
}

} // namespace gpupool::coordinator::test_token_book
