package b

import (
	_ "example.com/fixture/comp/x"
	_ "example.com/fixture/low/a"
)
