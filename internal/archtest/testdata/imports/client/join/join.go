package join

import _ "example.com/fixture/comp/x"
