module github.com/condense-dev/condense/hack/parsebench

go 1.26.0

require (
	github.com/bytedance/sonic v1.15.5
	github.com/condense-dev/condense v0.0.0
	github.com/go-json-experiment/json v1.27.2
	github.com/minio/simdjson-go v0.4.5
	github.com/tidwall/gjson v1.20.3
)

require (
	github.com/bytedance/gopkg v0.1.3 // indirect
	github.com/bytedance/sonic/loader v0.5.3 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/cloudwego/base64x v0.1.6 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/klauspost/cpuid/v2 v2.2.9 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.3.0 // indirect
	github.com/twitchyliquid64/golang-asm v0.15.1 // indirect
	golang.org/x/arch v0.0.0-20210923205945-b76863e36670 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace github.com/condense-dev/condense => ../..
