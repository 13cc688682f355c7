#!/bin/sh
# The man pages fusesched(8) and fusesched.conf(5), as built (MAN_DIR) and as
# installed (gzipped): man renders them without a warning, mandoc's lint finds
# nothing, and they describe what the program does: every command and option of
# `fusesched --help`, every config key of src/config/config.c's table (in its
# section), and nothing that is not there.
# Environment (tests/install/CMakeLists.txt): BUILD SRC FUSESCHED VERSION MAN_DIR.
TEST=install_man
. "$SRC/tests/install/lib.sh"
set -eu
[ -n "$MAN_DIR" ] || skip "man pages not built: scdoc was not found at configure time (scripts/install-deps installs it)"
command -v man >/dev/null || skip "man not found (package man-db)"
command -v mandoc >/dev/null || skip "mandoc not found (package mandoc): no lint"
command -v perl >/dev/null || skip "perl not found"
T=$(mktemp -d /tmp/fusesched-install-man.XXXXXX)
trap 'rm -rf "$T"' EXIT
export LC_ALL=C

for page in fusesched.8 fusesched.conf.5; do
	for f in "$MAN_DIR/$page" "$MAN_DIR/$page.gz"; do
		[ -s "$f" ] || fail "$f: missing or empty"
		w=$(MANWIDTH=80 man --warnings -l "$f" 2>&1 >/dev/null) || fail "man -l $f failed: $w"
		[ -z "$w" ] || fail "man --warnings -l $f: $w"
		l=$(mandoc -T lint "$f" 2>&1) || fail "mandoc -T lint $f: $l"
		[ -z "$l" ] || fail "mandoc -T lint $f: $l"
	done
	# Wide, unhyphenated, plain text for the content checks below.
	MANWIDTH=300 MANROFFOPT=-rHY=0 man -l "$MAN_DIR/$page" 2>/dev/null | sed 's/.\x08//g' > "$T/$page.txt"
	grep -q "fusesched $VERSION" "$T/$page.txt" || fail "$page: does not say 'fusesched $VERSION'"
done
note "man -l and mandoc -T lint: no warnings"

"$FUSESCHED" --help > "$T/help"
perl - "$T/help" "$T/fusesched.8.txt" <<'PERL' || fail "fusesched(8) does not match fusesched --help (above)"
use strict; use warnings;
my ($help_file, $man_file) = @ARGV;
local $/; open my $h, '<', $help_file or die; my $help = <$h>;
open my $m, '<', $man_file or die; my $man = <$m>;
my $bad = 0;
sub problem { print STDERR "fusesched(8): $_[0]\n"; $bad = 1 }
# Sections of the page: headings at column 0.
my %sec; my $cur = '';
for (split /\n/, $man) { if (/^([A-Z][A-Z ]+)$/) { $cur = $1; next } $sec{$cur} .= "$_\n" }
# The terms of a section: its lines indented 7 columns.
sub terms { my @t = ($sec{$_[0]} // '') =~ /^ {7}(\S.*)$/mg; return @t }
# Commands, from the usage lines.
my ($usage) = $help =~ /^usage:\n(.*?)\n\n/ms or die "no usage in --help";
my @cmds = $usage =~ /^  fusesched (mount|stat|reload|check-config|version|--help|[a-z][\w-]*)\b/mg;
push @cmds, 'BACKING MOUNTPOINT';
my @cterms = terms('COMMANDS');
for my $c (@cmds) {
	problem("SYNOPSIS lacks 'fusesched $c'") unless ($sec{SYNOPSIS} // '') =~ /fusesched \Q$c\E/;
	next if $c eq 'BACKING MOUNTPOINT';
	problem("COMMANDS lacks '$c'") unless grep { /^\Q$c\E\b/ || /, \Q$c\E\b/ } @cterms;
}
# Mount options: every -o NAME and -X of the help's table, and back.
my ($mopts) = $help =~ /^mount options:\n(.*?)\n\n/ms or die "no mount options in --help";
my %help_opt;
for (split /\n/, $mopts) {
	my ($col) = /^  (.{24})/ or next;
	$help_opt{$1} = 1 while $col =~ /(-o [a-z_]+|-[a-z])\b/g;
}
my @mterms = terms('MOUNT OPTIONS');
my %man_opt;
for (@mterms) { $man_opt{$1} = 1 while /(-o [a-z_]+|-[a-z])\b/g }
for (sort keys %help_opt) { problem("MOUNT OPTIONS lacks '$_'") unless $man_opt{$_} }
for (sort keys %man_opt) { problem("MOUNT OPTIONS has '$_', which --help does not list") unless $help_opt{$_} }
# stat options and --sort columns.
my ($sopts) = $help =~ /^stat options.*?\n(.*?)\n\n/ms or die "no stat options in --help";
my @long = $sopts =~ /^  (--[a-z-]+)/mg;
my ($cols) = $sopts =~ /--sort COLUMN\s+(.*)/s;
my @cols = $cols =~ /([a-z][a-z0-9-]*)(?: \(default\))?,?/g;
my $stat = $sec{'STAT OPTIONS'} // '';
for (@long) { problem("STAT OPTIONS lacks '$_'") unless $stat =~ /^ {7}\Q$_\E\b/m }
for (@cols) { problem("STAT OPTIONS lacks the --sort column '$_'") unless $stat =~ /(?<![\w-])\Q$_\E(?![\w-])/ }
# Signals the daemon handles.
problem("SIGNALS lacks $_") for grep { ($sec{SIGNALS} // '') !~ /\b$_\b/ } qw(SIGTERM SIGINT SIGHUP);
exit $bad;
PERL
note "fusesched(8): every command and option of --help, and no other"

perl - "$SRC/src/config/config.c" "$T/fusesched.conf.5.txt" <<'PERL' || fail "fusesched.conf(5) does not match src/config/config.c (above)"
use strict; use warnings;
my ($src_file, $man_file) = @ARGV;
local $/; open my $s, '<', $src_file or die; my $src = <$s>;
open my $m, '<', $man_file or die; my $man = <$m>;
my $bad = 0;
sub problem { print STDERR "fusesched.conf(5): $_[0]\n"; $bad = 1 }
my %secname = $src =~ /\[SEC_(\w+)\]\s*=\s*"(\w*)"/g;
my @keys = $src =~ /\{\s*SEC_(\w+),\s*"(\w+)",\s*set_\w+,/sg;
die "no keys parsed from $src_file: has its keys table changed shape?\n" if @keys < 2 * 10;
# Sections of the page: [name] headings at column 0; terms indented 7 columns, each
# with its description (the lines below it up to the next blank line).
my %sec; my $cur = '';
for (split /\n/, $man) { if (/^(\[\w+[^\]]*\]|[A-Z][A-Z ]+)$/) { $cur = $1; next } $sec{$cur} .= "$_\n" }
my %documented;
while (my ($sid, $key) = splice @keys, 0, 2) {
	my $name = $secname{$sid} // die "no name for SEC_$sid\n";
	my $heading = $name eq 'group' ? '[group "PATTERN"]' : "[$name]";
	my $body = $sec{$heading};
	if (!defined $body) { problem("no section $heading (for $key)"); next }
	my ($term) = $body =~ /^ {7}(\Q$key\E = [^\n]*)$/m;
	if (!defined $term) { problem("$heading lacks the key '$key'"); next }
	$documented{"$heading $key"} = 1;
}
# And no key the parser does not know.
for my $heading (grep { /^\[/ } keys %sec) {
	for my $key ($sec{$heading} =~ /^ {7}(\w+) = /mg) {
		problem("$heading $key: documented, but not a key of the parser") unless $documented{"$heading $key"};
	}
}
exit $bad;
PERL
note "fusesched.conf(5): every key of the parser in its section"
# The example config's keys are the parser's (check-config accepts it) and documented.
"$FUSESCHED" check-config "$SRC/conf/fusesched.conf" >/dev/null || fail "conf/fusesched.conf does not pass check-config"
