// TeamService's rules on a real store (docs/teams.md): one team per person, invitations by
// address (case-insensitive, single use, revoked at once, one pending per address), the last
// owner, owner-only changes, and the hooks that billing uses.
#include "teams/team_service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "auth/person_table.h"
#include "core/logging.h"
#include "tests/support/temp_database.h"

namespace gpuwerk::teams {
namespace {

class TeamServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::InitCrypto();
    ASSERT_TRUE(db_.Open());
    outbox_ = std::make_unique<mail::Outbox>(*db_, clock_, rng_);
    TeamOptions options;
    options.hooks.team_created = [this](store::Transaction&, const std::string& team_id,
                                        const std::string& owner) -> core::Result<void> {
      created_.push_back(team_id + "/" + owner);
      return {};
    };
    options.hooks.member_left = [this](store::Transaction&, const std::string& team_id,
                                       const std::string& person,
                                       int64_t at) -> core::Result<std::function<void()>> {
      left_.push_back(team_id + "/" + person + "@" + std::to_string(at));
      return std::function<void()>([this, person] { committed_left_.push_back(person); });
    };
    teams_ = std::make_unique<TeamService>(*db_, clock_, rng_, *outbox_, options);
  }

  auth::Principal Person(const std::string& email) {
    auth::PersonRow row;
    row.person.id = "person_" + std::to_string(next_++);
    row.person.email = email;
    row.person.created_at = clock_.NowUnix();
    row.person.email_proven_at = clock_.NowUnix();
    std::string norm = email;
    for (char& c : norm) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    row.email_norm = norm;
    EXPECT_TRUE(
        db_->Write([&](store::Transaction& tx) { return auth::PersonTable::Insert(tx, row); }));
    return {.person_id = row.person.id, .email = email, .email_proven = true};
  }

  int64_t Count(const std::string& sql) {
    return *db_->Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(sql));
      return row->Int(0);
    });
  }
  int64_t MailsTo(const std::string& to) {
    return Count("SELECT COUNT(*) FROM outbox_mails WHERE to_address = '" + to + "'");
  }
  /// The token of the newest invitation link mailed to `to`.
  std::string NewestToken(const std::string& to) {
    std::string body = *db_->Read([&](store::Transaction& tx) -> core::Result<std::string> {
      GPUWERK_ASSIGN_OR_RETURN(
          auto rows,
          tx.Query(std::string("SELECT text_body FROM outbox_mails WHERE to_address = ? ORDER BY "
                               "created_at DESC, ") +
                       // Insertion order: SQLite's rowid; on PostgreSQL the inserting
                       // transaction's id (these rows are never updated, which would change it).
                       (db_->Backend() == "postgresql" ? "xmin::text::bigint" : "rowid") + " DESC",
                   {to}));
      return rows.empty() ? std::string() : rows.front().Text("text_body");
    });
    const std::string marker = "/team/accept?token=";
    auto at = body.find(marker);
    if (at == std::string::npos) return "";
    auto start = at + marker.size();
    auto end = body.find_first_of(" \r\n", start);
    return body.substr(start, end - start);
  }

  core::FakeClock clock_;
  core::SodiumRng rng_;
  testing::TempDatabase db_;
  std::unique_ptr<mail::Outbox> outbox_;
  std::unique_ptr<TeamService> teams_;
  std::vector<std::string> created_;
  std::vector<std::string> left_;
  std::vector<std::string> committed_left_;  ///< the hook's after-commit actions that ran
  int next_ = 1;
  const auth::Caller from_{.address = "192.0.2.1"};
};

TEST_F(TeamServiceTest, CreatorIsOwnerAndOnePersonHasOneTeam) {
  auto owner = Person("owner@example.test");
  auto team = teams_->Create(owner, "  Lab 7 ", from_);
  ASSERT_TRUE(team) << team.error().message;
  EXPECT_EQ(team->team.name, "Lab 7");
  EXPECT_EQ(team->my_role, Role::kOwner);
  ASSERT_EQ(team->members.size(), 1u);
  EXPECT_EQ(created_, std::vector<std::string>{team->team.id + "/" + owner.person_id});
  auto again = teams_->Create(owner, "Another", from_);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().api_code, "already_in_team");
  auto other = Person("other@example.test");
  auto taken = teams_->Create(other, "LAB 7", from_);
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().api_code, "team_name_taken");
  for (const char* bad : {"", " ", "a/b", "x\ny",
                          "\xE2\x80\xAE"
                          "evil"}) {
    auto r = teams_->Create(other, bad, from_);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().api_code, "invalid_name");
  }
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'team.create'"), 1);
}

TEST_F(TeamServiceTest, ATeamNameThatLooksLikeATeamIdIsRefused) {
  auto owner = Person("owner@example.test");
  for (const std::string& like_an_id :
       {std::string("team_0123456789abcdef"), std::string("TEAM_x"), std::string(" team_lab")}) {
    auto r = teams_->Create(owner, like_an_id, from_);
    ASSERT_FALSE(r) << like_an_id;
    EXPECT_EQ(r.error().api_code, "invalid_name");
  }
  EXPECT_TRUE(teams_->Create(owner, "my team_lab", from_));
}

TEST_F(TeamServiceTest, InviteIsForThatAddressOnlyCaseInsensitivelyAndSingleUse) {
  auto owner = Person("owner@example.test");
  ASSERT_TRUE(teams_->Create(owner, "Lab", from_));
  auto bob = Person("Bob@Example.test");
  auto eve = Person("eve@example.test");
  auto sent = teams_->InviteByEmail(owner, "BOB@example.TEST", from_);
  ASSERT_TRUE(sent) << sent.error().message;
  EXPECT_FALSE(sent->resent);
  const std::string token = NewestToken("BOB@example.TEST");
  ASSERT_FALSE(token.empty());

  auto stolen = teams_->Accept(eve, token, from_);
  ASSERT_FALSE(stolen);
  EXPECT_EQ(stolen.error().api_code, "invite_for_another_address");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM team_members WHERE ended_at IS NULL"), 1);

  auto joined = teams_->Accept(bob, token, from_);
  ASSERT_TRUE(joined) << joined.error().message;
  EXPECT_EQ(joined->my_role, Role::kMember);
  EXPECT_EQ(joined->members.size(), 2u);
  EXPECT_TRUE(joined->invites.empty()) << "members see no invitations";

  auto used = teams_->Accept(bob, token, from_);
  ASSERT_FALSE(used);
  EXPECT_EQ(used.error().api_code, "invite_gone");
  auto unknown = teams_->Accept(eve, "not-a-token", from_);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().api_code, "invite_gone");
}

TEST_F(TeamServiceTest, InvitingTwiceResendsOnePendingInviteAndMembersGetNoMail) {
  auto owner = Person("owner@example.test");
  ASSERT_TRUE(teams_->Create(owner, "Lab", from_));
  ASSERT_TRUE(teams_->InviteByEmail(owner, "new@example.test", from_));
  const std::string first = NewestToken("new@example.test");
  clock_.Advance(std::chrono::seconds(5));
  auto again = teams_->InviteByEmail(owner, "New@Example.test", from_);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->resent);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM team_invites WHERE state = 'pending'"), 1);
  EXPECT_EQ(MailsTo("new@example.test"), 2);
  const std::string second = NewestToken("new@example.test");
  EXPECT_NE(first, second);
  auto person = Person("new@example.test");
  auto old_link = teams_->Accept(person, first, from_);
  ASSERT_FALSE(old_link);
  EXPECT_EQ(old_link.error().api_code, "invite_gone") << "a resend voids the older link";
  ASSERT_TRUE(teams_->Accept(person, second, from_));

  const int64_t mails = Count("SELECT COUNT(*) FROM outbox_mails");
  auto member = teams_->InviteByEmail(owner, "NEW@example.test", from_);
  ASSERT_FALSE(member);
  EXPECT_EQ(member.error().api_code, "already_member");
  auto self = teams_->InviteByEmail(owner, "owner@example.test", from_);
  ASSERT_FALSE(self);
  EXPECT_EQ(self.error().api_code, "already_member");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM outbox_mails"), mails) << "nothing sent";
}

TEST_F(TeamServiceTest, RevokedAndExpiredInvitesAreGone) {
  auto owner = Person("owner@example.test");
  ASSERT_TRUE(teams_->Create(owner, "Lab", from_));
  auto bob = Person("bob@example.test");
  auto sent = teams_->InviteByEmail(owner, "bob@example.test", from_);
  ASSERT_TRUE(sent);
  const std::string token = NewestToken("bob@example.test");
  ASSERT_TRUE(teams_->RevokeInvite(owner, sent->invite.id, from_));
  auto revoked = teams_->Accept(bob, token, from_);
  ASSERT_FALSE(revoked);
  EXPECT_EQ(revoked.error().api_code, "invite_gone");
  auto twice = teams_->RevokeInvite(owner, sent->invite.id, from_);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().api_code, "invite_gone");

  ASSERT_TRUE(teams_->InviteByEmail(owner, "bob@example.test", from_));
  const std::string fresh = NewestToken("bob@example.test");
  clock_.Advance(std::chrono::hours(7 * 24));
  auto expired = teams_->Accept(bob, fresh, from_);
  ASSERT_FALSE(expired);
  EXPECT_EQ(expired.error().api_code, "invite_gone");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM team_members WHERE person_id = '" + bob.person_id + "'"),
            0);
}

TEST_F(TeamServiceTest, C28_TheLastOwnerCannotLeaveBeRemovedOrDemotedUnlessAlone) {
  auto owner = Person("owner@example.test");
  ASSERT_TRUE(teams_->Create(owner, "Lab", from_));
  auto bob = Person("bob@example.test");
  ASSERT_TRUE(teams_->InviteByEmail(owner, "bob@example.test", from_));
  ASSERT_TRUE(teams_->Accept(bob, NewestToken("bob@example.test"), from_));

  for (auto r :
       {teams_->Leave(owner, from_), teams_->RemoveMember(owner, owner.person_id, from_)}) {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().api_code, "last_owner");
  }
  auto demote = teams_->SetRole(owner, owner.person_id, "member", from_);
  ASSERT_FALSE(demote);
  EXPECT_EQ(demote.error().api_code, "last_owner");

  // A member may not manage the team.
  auto remove = teams_->RemoveMember(bob, owner.person_id, from_);
  auto invite = teams_->InviteByEmail(bob, "x@example.test", from_);
  auto promote = teams_->SetRole(bob, bob.person_id, "owner", from_);
  ASSERT_FALSE(remove);
  ASSERT_FALSE(invite);
  ASSERT_FALSE(promote);
  EXPECT_EQ(remove.error().api_code, "owner_only");
  EXPECT_EQ(invite.error().api_code, "owner_only");
  EXPECT_EQ(promote.error().api_code, "owner_only");

  // With a second owner, the first may step down and leave.
  ASSERT_TRUE(teams_->SetRole(owner, bob.person_id, "owner", from_));
  ASSERT_TRUE(teams_->SetRole(owner, owner.person_id, "member", from_));
  ASSERT_TRUE(teams_->Leave(owner, from_));
  ASSERT_EQ(left_.size(), 1u);
  EXPECT_EQ(committed_left_, std::vector<std::string>{owner.person_id});
  auto gone = teams_->Get(owner);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().api_code, "no_team");

  // Bob, the last owner, with a member: refused. As the team's last member: he leaves and the
  // team closes, its pending invitation revoked.
  auto carl = Person("carl@example.test");
  ASSERT_TRUE(teams_->InviteByEmail(bob, "carl@example.test", from_));
  ASSERT_TRUE(teams_->Accept(carl, NewestToken("carl@example.test"), from_));
  auto last = teams_->Leave(bob, from_);
  ASSERT_FALSE(last);
  EXPECT_EQ(last.error().api_code, "last_owner");
  EXPECT_EQ(committed_left_.size(), 1u);  // refused: nothing to run after a commit
  ASSERT_TRUE(teams_->RemoveMember(bob, carl.person_id, from_));
  ASSERT_TRUE(teams_->InviteByEmail(bob, "dora@example.test", from_));
  const std::string dora_token = NewestToken("dora@example.test");
  ASSERT_TRUE(teams_->Leave(bob, from_));
  auto closed = teams_->Get(bob);
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().api_code, "no_team");
  auto dora = Person("dora@example.test");
  auto join = teams_->Accept(dora, dora_token, from_);
  ASSERT_FALSE(join);
  EXPECT_EQ(join.error().api_code, "invite_gone");
}

// C28's other half: two owners demote each other at the same moment, twenty times over; each
// time exactly one demotion goes through (the other finds its caller no longer an owner, or the
// other the last one) and the team keeps exactly one owner.
TEST_F(TeamServiceTest, C28_TwoOwnersDemotingEachOtherAtOnceLeaveOneOwner) {
  for (int round = 0; round < 20; ++round) {
    const std::string n = std::to_string(round);
    auto ann = Person("ann" + n + "@example.test");
    auto ben = Person("ben" + n + "@example.test");
    auto team = teams_->Create(ann, "Race " + n, from_);
    ASSERT_TRUE(team);
    ASSERT_TRUE(teams_->InviteByEmail(ann, "ben" + n + "@example.test", from_));
    ASSERT_TRUE(teams_->Accept(ben, NewestToken("ben" + n + "@example.test"), from_));
    ASSERT_TRUE(teams_->SetRole(ann, ben.person_id, "owner", from_));
    std::atomic<int> done{0};
    core::Result<Member> a_demotes_b = core::Internal("not run");
    core::Result<Member> b_demotes_a = core::Internal("not run");
    std::thread t1([&] { a_demotes_b = teams_->SetRole(ann, ben.person_id, "member", from_); });
    std::thread t2([&] { b_demotes_a = teams_->SetRole(ben, ann.person_id, "member", from_); });
    t1.join();
    t2.join();
    for (const auto* r : {&a_demotes_b, &b_demotes_a}) {
      if (*r) {
        ++done;
      } else {
        EXPECT_TRUE(r->error().api_code == "owner_only" || r->error().api_code == "last_owner")
            << r->error().api_code;
      }
    }
    EXPECT_EQ(done, 1) << "round " << round;
    EXPECT_EQ(Count("SELECT COUNT(*) FROM team_members WHERE team_id = '" + team->team.id +
                    "' AND ended_at IS NULL AND role = 'owner'"),
              1)
        << "round " << round;
  }
}

TEST_F(TeamServiceTest, RemovingAMemberEndsTheMembershipRunsTheHookAndMailsThem) {
  auto owner = Person("owner@example.test");
  auto team = teams_->Create(owner, "Lab", from_);
  ASSERT_TRUE(team);
  auto bob = Person("bob@example.test");
  ASSERT_TRUE(teams_->InviteByEmail(owner, "bob@example.test", from_));
  ASSERT_TRUE(teams_->Accept(bob, NewestToken("bob@example.test"), from_));
  const int64_t before = MailsTo("bob@example.test");
  clock_.Advance(std::chrono::seconds(90));
  ASSERT_TRUE(teams_->RemoveMember(owner, bob.person_id, from_));
  EXPECT_EQ(MailsTo("bob@example.test"), before + 1);
  ASSERT_EQ(left_.size(), 1u);
  EXPECT_EQ(left_[0], team->team.id + "/" + bob.person_id + "@" + std::to_string(clock_.NowUnix()));
  EXPECT_EQ(committed_left_, std::vector<std::string>{bob.person_id});
  auto again = teams_->RemoveMember(owner, bob.person_id, from_);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().api_code, "not_found");
  // Removed, bob is in no team and may start their own.
  EXPECT_EQ(teams_->Get(bob).error().api_code, "no_team");
  EXPECT_TRUE(teams_->Create(bob, "Bobs", from_));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'team.member_remove' AND "
                  "source_address = '192.0.2.1'"),
            1);
}

}  // namespace
}  // namespace gpuwerk::teams
