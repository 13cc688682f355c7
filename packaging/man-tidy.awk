# Tidies scdoc's roff for `mandoc -T lint` without changing how groff renders
# it: drops the paragraph macros scdoc puts right after .TH/.SH/.SS or before
# .SH/.SS/.P or the end (empty paragraphs), moves one that ends an indented
# block (.P .RE) after the .RE, and wraps filled text lines over 79 bytes at a
# space (never before a '.' or a quote, which would start a request line);
# writes the quotes of a heading as \(dq.
# Run as: LC_ALL=C awk -f man-tidy.awk IN > OUT
{ line[n++] = $0 }

function is_macro(l, names) { return l ~ ("^\\.(" names ")( |$)") }

END {
	changed = 1
	while (changed) {
		changed = 0
		m = 0
		for (i = 0; i < n; i++) {
			l = line[i]
			if (l == ".P") {
				if (m > 0 && is_macro(out[m - 1], "TH|SH|SS|P")) { changed = 1; continue }
				if (i + 1 >= n || is_macro(line[i + 1], "SH|SS|P")) { changed = 1; continue }
				if (line[i + 1] == ".RE") {
					out[m++] = ".RE"; out[m++] = ".P"; i++; changed = 1; continue
				}
			}
			out[m++] = l
		}
		for (i = 0; i < m; i++) line[i] = out[i]
		n = m
	}
	nofill = 0
	for (i = 0; i < n; i++) {
		l = line[i]
		if (l ~ /^\.nf( |$)/) nofill = 1
		if (l ~ /^\.fi( |$)/) nofill = 0
		# scdoc passes a heading's quotes to .SH, where roff takes them as argument quotes.
		if (l ~ /^\.S[HS] .*"/) gsub(/"/, "\\(dq", l)
		if (nofill || l ~ /^[.']/) { print l; continue }
		while (length(l) > 79) {
			cut = 0
			for (j = 79; j > 1; j--) {
				if (substr(l, j, 1) != " ") continue
				before = substr(l, j - 1, 1); after = substr(l, j + 1, 1)
				if (before == "\\" || before == " " || after == "" || after ~ /[ .'"]/) continue
				cut = j
				break
			}
			if (!cut) break
			print substr(l, 1, cut - 1)
			l = substr(l, cut + 1)
		}
		print l
	}
}
