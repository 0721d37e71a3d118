package x

import (
	_ "example.com/fixture/comp/y"
	_ "example.com/fixture/low/a"
)
