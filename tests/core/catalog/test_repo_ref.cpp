#include "core/catalog/repo_ref.hpp"
#include "core/catalog/repository.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_repo_ref {

using gpupool::catalog::clone_dir_name;
using gpupool::catalog::parse_repo_ref;
using gpupool::catalog::readme_description;

TEST_CASE("a repository reference splits off a pinned revision only where one can be") {
    struct Case {
        const char* text;
        const char* location;
        const char* revision;
    };
    for (const Case& c : {Case{"https://github.com/org/recipes", "https://github.com/org/recipes", ""},
                          Case{"https://github.com/org/recipes@v2", "https://github.com/org/recipes", "v2"},
                          Case{"/srv/recipes@3f2a9c1", "/srv/recipes", "3f2a9c1"},
                          Case{"git@github.com:org/recipes.git", "git@github.com:org/recipes.git", ""},
                          Case{"git@github.com:org/recipes.git@main", "git@github.com:org/recipes.git", "main"},
                          Case{"https://user@host.example/r.git", "https://user@host.example/r.git", ""},
                          Case{"./recipes", "./recipes", ""}}) {
        INFO(c.text);
        auto ref = parse_repo_ref(c.text, "recipes[0]");
        REQUIRE(ref);
        CHECK(ref->location == c.location);
        CHECK(ref->revision == c.revision);
        CHECK(ref->text() == c.text);
    }
}

TEST_CASE("a repository reference names the folder its recipes are in after `#`, with or without a revision") {
    struct Case {
        const char* text;
        const char* location;
        const char* revision;
        const char* subdir;
    };
    for (const Case& c :
         {Case{"https://github.com/org/gpupool#recipes", "https://github.com/org/gpupool", "", "recipes"},
          Case{"https://github.com/org/gpupool@v2#lab/recipes", "https://github.com/org/gpupool", "v2", "lab/recipes"},
          Case{"/srv/project#recipes", "/srv/project", "", "recipes"},
          Case{"git@github.com:org/r.git@main#a_b/c-d.e", "git@github.com:org/r.git", "main", "a_b/c-d.e"}}) {
        INFO(c.text);
        auto ref = parse_repo_ref(c.text, "--repo");
        REQUIRE(ref);
        CHECK(ref->location == c.location);
        CHECK(ref->revision == c.revision);
        CHECK(ref->subdir == c.subdir);
        CHECK(ref->text() == c.text);
    }
    CHECK(parse_repo_ref("/srv/project#recipes/", "x")->subdir == "recipes");
    CHECK(parse_repo_ref("/srv/project#recipes", "x")->origin_repo() == "/srv/project#recipes");
    for (const char* bad : {"/srv/p#../etc", "/srv/p#/abs", "/srv/p#.git", "/srv/p#a/../b", "/srv/p#", "#recipes",
                            "/srv/p#a//b", "/srv/p#a;b"}) {
        INFO(bad);
        auto ref = parse_repo_ref(bad, "recipes[2]");
        REQUIRE_FALSE(ref);
        CHECK(ref.error().field == "recipes[2]");
    }
}

TEST_CASE("a repository reference that git could misread is refused, naming the field") {
    for (const char* bad : {"", "--upload-pack=touch /tmp/x", "-c", "ext::sh -c touch% /tmp/x", "ext::sh",
                            "https://h/r@", "https://h/r@-x", "https://h/r@a;b", "has space/r", "tab\there/r"}) {
        INFO(bad);
        auto ref = parse_repo_ref(bad, "--repo");
        REQUIRE_FALSE(ref);
        CHECK(ref.error().field == "--repo");
    }
    CHECK_FALSE(parse_repo_ref(std::string(3000, 'a'), "--repo"));
}

TEST_CASE("two references never share a clone, and the clone's name reads like the repository") {
    auto a = *parse_repo_ref("https://github.com/org/recipes.git", "x");
    auto b = *parse_repo_ref("https://github.com/org/recipes.git@v1", "x");
    auto c = *parse_repo_ref("https://gitlab.com/org/recipes.git", "x");
    CHECK(clone_dir_name(a).starts_with("recipes-"));
    CHECK(clone_dir_name(a) != clone_dir_name(b));
    CHECK(clone_dir_name(a) != clone_dir_name(c));
    CHECK(clone_dir_name(a) == clone_dir_name(*parse_repo_ref("https://github.com/org/recipes.git", "y")));
    CHECK(clone_dir_name(*parse_repo_ref("/../..", "x")).find('/') == std::string::npos);
    // Two folders of one revision read the same checkout.
    CHECK(clone_dir_name(*parse_repo_ref("https://github.com/org/recipes.git#lab", "x")) == clone_dir_name(a));
    CHECK(clone_dir_name(*parse_repo_ref("https://github.com/org/recipes.git@v1#lab", "x")) == clone_dir_name(b));
}

TEST_CASE("a README's description is its first paragraph that is not a heading, made printable") {
    CHECK(readme_description("# title\n\nFirst line\nsecond line.\n\nNext paragraph.\n") == "First line second line.");
    CHECK(readme_description("<!-- badge -->\n## sub\n  Indented text.\r\n") == "Indented text.");
    CHECK(readme_description("") == "");
    CHECK(readme_description("# only a title\n") == "");
    CHECK(readme_description("Evil \x1b[31mred\n") == "Evil \\x1b[31mred");
    CHECK(readme_description(std::string(1000, 'x')).size() == 300);
}

} // namespace test_repo_ref
} // namespace
