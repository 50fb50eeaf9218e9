#!/usr/bin/env python3
"""Every `k3serve SUBCOMMAND ...` command line shown in README.md and docs/*.md names a real
subcommand, and every --option it shows is one that subcommand's --help lists. A renamed or
removed flag fails here instead of in a reader's terminal. (The commands with their outputs are
run by the tests of each area: README quick start by tests/node/readme_examples.test.mjs,
doctor, download, install and the load balancer by tests/deploy.)"""
import glob, os, re, subprocess, unittest

BIN = os.environ.get('K3SERVE_BIN', 'build/k3serve')
SRC = os.environ.get('K3_SOURCE_DIR', os.path.join(os.path.dirname(__file__), '../..'))
COMMAND = re.compile(r'(?:^|[\s`(/])k3serve ([a-z][a-z-]+)((?: +(?:[^\s`|#;&)]+))*)')


def shown_commands():
    pages = [os.path.join(SRC, 'README.md')] + sorted(glob.glob(os.path.join(SRC, 'docs', '*.md')))
    for page in pages:
        with open(page, encoding='utf-8') as f:
            lines = f.readlines()
        for lineno, line in enumerate(lines, 1):
            for m in COMMAND.finditer(line):
                yield os.path.relpath(page, SRC), lineno, m.group(1), m.group(2)


class DocsCommands(unittest.TestCase):
    def test_subcommands_and_options_exist(self):
        listing = subprocess.run([BIN, '--help'], capture_output=True, text=True).stdout
        known = set(re.findall(r'^  ([a-z][a-z-]+) ', listing, re.M))
        self.assertIn('serve', known)
        helps, checked, problems = {}, 0, []
        for page, lineno, sub, rest in shown_commands():
            if sub not in known:
                continue  # prose such as "k3serve runs ..." names no subcommand
            if sub not in helps:
                r = subprocess.run([BIN, sub, '--help'], capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, f'k3serve {sub} --help')
                helps[sub] = r.stdout + r.stderr
            for opt in re.findall(r'(?<![\w-])(--[a-z][a-z0-9-]*)', rest):
                checked += 1
                if opt not in helps[sub] and opt != '--help':
                    problems.append(f'{page}:{lineno}: k3serve {sub} {opt} is not in `k3serve {sub} --help`')
        self.assertEqual(problems, [])
        self.assertGreater(checked, 10)  # the pages do show options


if __name__ == '__main__':
    unittest.main(verbosity=2)
