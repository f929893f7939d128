# t/066_doc_runner.pl: test/doc_examples.py's own limits (review of issue
# 29): a snippet that hangs ends at its timeout with everything of its
# process group; one that leaves a process outside its group (setsid, as
# pg_ctl does for its server) holding its output does not hold the run past
# the timeout and a short grace (it held it until that process ended:
# forever, for a server started without -l).
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Temp qw(tempdir);
use Time::HiRes qw(time);

-f 'test/doc_examples.py' or plan skip_all => 'test/doc_examples.py is not here';
my $dir = tempdir(CLEANUP => 1);
chmod 0755, $dir;

sub page
{
	my ($name, $code) = @_;
	open(my $f, '>', "$dir/$name") or die;
	print $f "A page.\n\n```sh\n$code\n```\n";
	close($f);
	return "$dir/$name";
}

# the pid in pidfile when that process runs (a zombie does not: killed, not yet reaped)
sub alive
{
	my ($pidfile) = @_;
	my $pid = slurp_file($pidfile);
	chomp $pid;
	open(my $f, '<', "/proc/$pid/stat") or return 0;
	my $stat = <$f>;
	return $stat =~ /^\d+ \(.*\) [^Z]/ ? $pid : 0;
}

sub runner
{
	my ($page) = @_;
	local $ENV{PGPORT} = '1';		# no demo
	delete local $ENV{TDB_DEMO_DIR};
	my $t0 = time;
	my ($out, $err) = run_command([ 'python3', 'test/doc_examples.py', '--timeout', '2', $page ]);
	return ($out . $err, time - $t0);
}

# hangs, with a child in its group: both end at the timeout
my ($out, $took) = runner(page('hang.md', "sleep 300 &\necho \$! >$dir/child.pid\nsleep 300"));
like($out, qr/FAIL .*hang\.md:3 \(sh, .*\): exit timeout/, 'a hanging snippet fails at its timeout');
ok($took < 10, "and the run goes on ($took s)");
ok(!alive("$dir/child.pid"), 'what it started in its process group is killed');

# leaves a process outside its group holding its output
($out, $took) = runner(page('escape.md', "setsid sleep 300 &\necho \$! >$dir/escaped.pid\necho started"));
like($out, qr/still holds its output; not waited for/, 'a process outside the group holding the output is named');
like($out, qr/doc examples: 0 passed, 1 failed, 0 not run/, 'the snippet fails');
ok($took < 15, "the run is not held past the timeout and the grace ($took s)");
if (my $pid = alive("$dir/escaped.pid")) { kill 'KILL', $pid; }

# changes a tracked file of the checkout: the snippet fails, naming it (new
# untracked files were removed already; a changed tracked file passed)
SKIP:
{
	skip 'no git', 3 unless system('git --version >/dev/null 2>&1') == 0;
	my $repo = "$dir/repo";
	mkdir $repo;
	mkdir "$repo/test";
	system('cp', 'test/doc_examples.py', "$repo/test/") == 0 or die;
	open(my $f, '>', "$repo/kept.txt") or die;
	print $f "as committed\n";
	close($f);
	system("cd $repo && git init -q && git add kept.txt && git -c user.name=t -c user.email=t\@t commit -q -m x") == 0
	  or die 'git init failed';
	my $page = page('writes.md', "echo changed >kept.txt\necho new >new.txt");
	local $ENV{PGPORT} = '1';
	delete local $ENV{TDB_DEMO_DIR};
	my ($o, $e) = run_command([ 'python3', "$repo/test/doc_examples.py", '--timeout', '5', $page ]);
	like($o, qr/the snippet changed files of the checkout: kept\.txt/, 'a snippet changing a tracked file is named');
	like($o, qr/doc examples: 0 passed, 1 failed/, 'and fails');
	ok(!-e "$repo/new.txt", 'the untracked file it made is removed');
}

done_testing();
